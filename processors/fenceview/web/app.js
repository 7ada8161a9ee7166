// fenceview page: the fences on a Leaflet map (basemap tiles from the
// server's --tiles, none offline) coloured by occupancy, the recent and live
// triggers, and a fence's settings, occupants and triggers on click. Leaflet
// is vendored (/static/vendor/leaflet); nothing else is loaded from outside
// but the basemap tiles, and the page works without them.
"use strict";
(function () {
  const POLL_MS = 2000, MAX_TRIGGERS = 100, HISTORY = 50, FENCE_TRIGGERS = 10;
  // A label shows only on a fence at least this many pixels across, and
  // never over another label: small neighbouring fences at low zoom show
  // their counts on hover and click instead.
  const LABEL_MIN_PX = 26, LABEL_PAD_PX = 2, MAX_LABELS = 300;
  const $ = (id) => document.getElementById(id);
  const state = { version: null, ids: "", fences: new Map(), selected: null, maxCount: 1, fitted: false, tileErrors: 0 };

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function setStatus(text, bad) {
    const s = $("status");
    s.textContent = text;
    s.classList.toggle("bad", !!bad);
  }

  async function getJSON(url) {
    const r = await fetch(url, { cache: "no-store" });
    let body = null;
    try { body = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) {
      const err = new Error((body && body.error) || r.status + " " + r.statusText);
      err.status = r.status;
      throw err;
    }
    return body;
  }

  const map = L.map("map", { zoomSnap: 0.25, worldCopyJump: true, preferCanvas: false });
  map.setView([52.52, 13.405], 11);
  map.attributionControl.setPrefix('<a href="https://leafletjs.com">Leaflet</a>');
  document.body.dataset.zoom = String(map.getZoom());
  window.fenceview = { map }; // for the console and the browser test

  async function loadConfig() {
    const cfg = await getJSON("/v1/config");
    document.body.dataset.tiles = cfg.tiles ? "on" : "none";
    if (!cfg.tiles) return;
    const layer = L.tileLayer(cfg.tiles, { attribution: cfg.tiles_attribution || "", maxZoom: 19, crossOrigin: false });
    // Tiles that fail (offline, blocked) leave the map blank underneath:
    // the fences, counts and panels work the same.
    layer.on("tileerror", () => {
      state.tileErrors++;
      document.body.dataset.tileErrors = String(state.tileErrors);
    });
    layer.addTo(map);
  }

  // [lon, lat] positions to Leaflet's [lat, lon].
  const ll = (ring) => ring.map((p) => [p[1], p[0]]);

  function layerFor(f) {
    const g = f.geometry || {};
    const style = { color: "#37474f", weight: 1, fillColor: "#ffffff", fillOpacity: 0.55, fillRule: "evenodd", className: "fence" };
    if (g.type === "Point") return L.circle([g.coordinates[1], g.coordinates[0]], Object.assign({ radius: f.radius_m }, style));
    if (g.type === "MultiPolygon") return L.polygon(g.coordinates.map((poly) => poly.map(ll)), style);
    return L.polygon((g.coordinates || []).map(ll), style);
  }

  // white → orange → red, relative to the busiest fence.
  function colour(count) {
    if (!count) return "#ffffff";
    const t = Math.min(count / state.maxCount, 1);
    const mix = (a, b, u) => Math.round(a + (b - a) * u);
    const [r, g, b] = t < 0.5
      ? [mix(255, 255, t * 2), mix(255, 152, t * 2), mix(255, 0, t * 2)]
      : [mix(255, 211, (t - 0.5) * 2), mix(152, 47, (t - 0.5) * 2), mix(0, 47, (t - 0.5) * 2)];
    return "rgb(" + r + "," + g + "," + b + ")";
  }

  function render(list) {
    for (const s of state.fences.values()) s.layer.remove();
    state.fences.clear();
    // Large fences first, so small ones stay clickable on top.
    const area = (f) => Math.abs((f.bounds.north - f.bounds.south) * (f.bounds.east - f.bounds.west));
    for (const f of list.fences.slice().sort((a, b) => area(b) - area(a))) {
      const layer = layerFor(f);
      layer.bindTooltip(String(f.count), { permanent: true, direction: "center", className: "count-label", interactive: false, opacity: 1 });
      layer.on("click", () => select(f.id));
      layer.addTo(map);
      const path = layer.getElement();
      path.setAttribute("data-fence-id", f.id);
      path.setAttribute("data-count", String(f.count));
      path.setAttribute("tabindex", "0");
      path.addEventListener("keydown", (e) => { if (e.key === "Enter") select(f.id); });
      const label = layer.getTooltip().getElement();
      label.setAttribute("data-fence-id", f.id);
      const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
      path.append(title);
      state.fences.set(f.id, { layer, path, label, title, name: f.name, count: f.count });
    }
    if (!state.fitted && list.bounds) {
      const b = list.bounds;
      map.fitBounds([[b.south, b.west], [b.north, b.east]], { padding: [16, 16] });
      state.fitted = true;
    }
    placeLabels();
  }

  // placeLabels shows a fence's count label only where it fits: on a fence
  // wide enough on screen, not over a label already placed (busiest first).
  function placeLabels() {
    const view = map.getBounds().pad(0.1);
    const cands = [];
    for (const [id, s] of state.fences) {
      const b = s.layer.getBounds();
      let show = view.intersects(b);
      if (show) {
        const nw = map.latLngToContainerPoint(b.getNorthWest()), se = map.latLngToContainerPoint(b.getSouthEast());
        show = Math.min(Math.abs(se.x - nw.x), Math.abs(se.y - nw.y)) >= LABEL_MIN_PX;
        if (show) cands.push({ id, s, c: map.latLngToContainerPoint(b.getCenter()) });
      }
      if (!show) hideLabel(s);
    }
    cands.sort((a, b) => b.s.count - a.s.count || (a.id < b.id ? -1 : 1));
    const placed = [];
    for (const cand of cands) {
      const w = 8 * String(cand.s.count).length + 12, h = 18;
      const r = { x1: cand.c.x - w / 2 - LABEL_PAD_PX, y1: cand.c.y - h / 2 - LABEL_PAD_PX, x2: cand.c.x + w / 2 + LABEL_PAD_PX, y2: cand.c.y + h / 2 + LABEL_PAD_PX };
      const clash = placed.length >= MAX_LABELS || placed.some((p) => r.x1 < p.x2 && p.x1 < r.x2 && r.y1 < p.y2 && p.y1 < r.y2);
      if (clash) { hideLabel(cand.s); continue; }
      placed.push(r);
      cand.s.label.classList.remove("hidden");
    }
    document.body.dataset.zoom = String(map.getZoom());
    document.body.dataset.labels = String(placed.length);
  }
  function hideLabel(s) { s.label.classList.add("hidden"); }
  map.on("zoomend moveend", placeLabels);

  function updateCounts(list) {
    state.maxCount = Math.max(1, ...list.fences.map((f) => f.count));
    $("legend-max").textContent = String(state.maxCount);
    let total = 0;
    for (const f of list.fences) {
      total += f.count;
      const s = state.fences.get(f.id);
      if (!s) continue;
      s.count = f.count;
      s.path.setAttribute("data-count", String(f.count));
      s.layer.setStyle({ fillColor: colour(f.count) });
      s.layer.setTooltipContent(String(f.count));
      s.title.textContent = f.name + " (" + f.id + "): " + f.count + " inside";
    }
    $("summary").textContent = list.total + " fences · " + total + " inside · catalogue v" + list.catalogue_version;
  }

  // The recent triggers, once: the list starts with what happened before
  // the page was opened.
  let historyLoaded = false;
  async function loadHistory() {
    const l = await getJSON("/v1/triggers?limit=" + HISTORY);
    for (const t of l.triggers) addTrigger(t, true);
    historyLoaded = true;
    document.body.dataset.history = String(l.triggers.length);
  }

  let configLoaded = false;
  async function refresh() {
    try {
      if (!configLoaded) { await loadConfig(); configLoaded = true; }
      if (!historyLoaded) await loadHistory();
      let list = await getJSON("/v1/fences?limit=10000");
      const ids = list.fences.map((f) => f.id).join("\n");
      if (list.catalogue_version !== state.version || ids !== state.ids) {
        list = await getJSON("/v1/fences?limit=10000&geometry=true");
        render(list);
        state.version = list.catalogue_version;
        state.ids = list.fences.map((f) => f.id).join("\n");
        if (state.selected) markSelected(state.selected);
      }
      updateCounts(list);
      placeLabels();
      setStatus("ready", false);
      document.body.dataset.loaded = "true";
    } catch (e) {
      setStatus(e.status === 503 ? e.message : "error: " + e.message, true);
    }
  }

  function markSelected(id) {
    for (const [fid, s] of state.fences) {
      const on = fid === id;
      s.path.classList.toggle("selected", on);
      s.layer.setStyle(on ? { color: "#0d47a1", weight: 3 } : { color: "#37474f", weight: 1 });
      if (on) s.layer.bringToFront();
    }
  }

  function kv(dl, k, v) { dl.append(el("dt", {}, k), el("dd", {}, v)); }

  function fmtTime(ms) { return ms ? new Date(ms).toLocaleString() : "–"; }

  function fmtSeconds(s) {
    if (s >= 3600 && s % 3600 === 0) return s / 3600 + " h";
    if (s >= 60 && s % 60 === 0) return s / 60 + " min";
    return s + " s";
  }

  function settingsList(st) {
    const dl = el("dl", { id: "settings" });
    const own = new Set(st.own || []);
    const row = (key, label, value) => {
      const dd = el("dd", { "data-setting": key, "data-own": String(own.has(key)) }, value);
      dd.append(el("small", {}, own.has(key) ? " (fence)" : " (default)"));
      dl.append(el("dt", {}, label), dd);
    };
    if (st.detector) row("detector", "detector", st.detector);
    row("min_samples", "min samples", String(st.min_samples));
    row("min_dwell_s", "min dwell", fmtSeconds(st.min_dwell_s));
    row("hysteresis_m", "exit hysteresis", st.hysteresis_m + " m");
    row("loiter_s", "DWELL after", fmtSeconds(st.loiter_s));
    row("silence_timeout_s", "silence timeout", fmtSeconds(st.silence_timeout_s));
    return dl;
  }

  function triggerItem(t) {
    const li = el("li", { class: t.type, "data-trigger-id": t.trigger_id, "data-fence-id": t.fence_id, "data-device-id": t.device_id });
    const when = el("time", { datetime: t.event_time || "" }, t.event_time_ms ? new Date(t.event_time_ms).toLocaleTimeString() : "");
    const fence = state.fences.get(t.fence_id);
    li.append(when, el("span", { class: "type" }, t.type), document.createTextNode(t.device_id + " → " + (fence ? fence.name : t.fence_id)));
    return li;
  }

  async function select(id) {
    state.selected = id;
    document.dispatchEvent(new CustomEvent("fence-selected", { detail: id })); // visits.js
    markSelected(id);
    const box = $("details");
    box.dataset.fenceId = id;
    $("device").replaceChildren();
    try {
      const [f, trig] = await Promise.all([
        getJSON("/v1/fences/" + encodeURIComponent(id)),
        getJSON("/v1/triggers?limit=" + FENCE_TRIGGERS + "&fence=" + encodeURIComponent(id)),
      ]);
      if (state.selected !== id) return;
      const dl = el("dl");
      kv(dl, "name", f.name || "–");
      kv(dl, "id", f.id);
      kv(dl, "kind", f.kind + (f.radius_m ? " (" + f.radius_m + " m)" : ""));
      kv(dl, "inside", String(f.count));
      kv(dl, "enters / exits", f.enters_total + " / " + f.exits_total);
      kv(dl, "dwells", String(f.dwells_total));
      kv(dl, "last change", fmtTime(f.last_change_ms));
      kv(dl, "partition", String(f.partition) + (f.lag_records !== undefined ? " (lag " + f.lag_records + ")" : ""));
      kv(dl, "catalogue", "v" + f.catalogue_version);
      const parts = [dl];
      if (f.settings) parts.push(el("h3", {}, "Debounce settings"), settingsList(f.settings));
      const ul = el("ul", { id: "devices" });
      for (const d of f.devices) {
        const li = el("li", { "data-device-id": d }, d);
        li.addEventListener("click", () => showDevice(d));
        ul.append(li);
      }
      parts.push(el("h3", {}, "Inside" + (f.devices_truncated ? " (first " + f.devices.length + " of " + f.count + ")" : " (" + f.devices.length + ")")), ul);
      const recent = el("ul", { id: "fence-triggers" });
      for (const t of trig.triggers) recent.append(triggerItem(t));
      if (!trig.triggers.length) recent.append(el("li", { class: "hint" }, "none recently"));
      parts.push(el("h3", {}, "Recent triggers"), recent);
      box.replaceChildren(...parts);
      box.dataset.count = String(f.count);
    } catch (e) {
      box.replaceChildren(el("p", { class: "hint" }, e.message));
    }
  }

  async function showDevice(id) {
    const box = $("device");
    try {
      const d = await getJSON("/v1/devices/" + encodeURIComponent(id));
      const dl = el("dl");
      kv(dl, "device", d.device_id);
      kv(dl, "partition", String(d.partition));
      kv(dl, "last ping", fmtTime(d.last_event_time_ms));
      kv(dl, "last HLC", String(d.last_hlc));
      kv(dl, "pings / stale", d.pings + " / " + d.stale_pings);
      for (const f of d.fences) kv(dl, f.fence_name || f.fence_id, f.phase + (f.dwell_fired ? " · dwell" : ""));
      box.replaceChildren(el("h3", {}, "Device"), dl);
      box.dataset.deviceId = id;
    } catch (e) {
      box.replaceChildren(el("p", { class: "hint" }, e.message));
    }
  }

  // Triggers shown, by id: history and stream may both carry one.
  const shown = new Set();

  // addTrigger shows t at the top (a live trigger) or, with older, at the
  // bottom (history, newest first).
  function addTrigger(t, older) {
    if (shown.has(t.trigger_id)) return;
    const list = $("triggers");
    if (older && list.children.length >= MAX_TRIGGERS) return;
    shown.add(t.trigger_id);
    const li = triggerItem(t);
    if (older) {
      list.append(li);
      return;
    }
    list.prepend(li);
    while (list.children.length > MAX_TRIGGERS) {
      shown.delete(list.lastElementChild.dataset.triggerId);
      list.lastElementChild.remove();
    }
    const fence = state.fences.get(t.fence_id);
    if (fence) {
      fence.path.classList.add("flash");
      setTimeout(() => fence.path.classList.remove("flash"), 800);
    }
    if (state.selected === t.fence_id) select(t.fence_id);
  }

  function stream() {
    const es = new EventSource("/v1/triggers/stream");
    es.addEventListener("open", () => {
      document.body.dataset.stream = "open";
      $("stream-state").textContent = "live";
    });
    es.addEventListener("error", () => {
      document.body.dataset.stream = "reconnecting";
      $("stream-state").textContent = "reconnecting…";
    });
    es.addEventListener("trigger", (e) => {
      try { addTrigger(JSON.parse(e.data)); } catch (err) { /* ignore a malformed event */ }
    });
    es.addEventListener("dropped", () => {
      $("stream-state").textContent = "live (some triggers dropped: too many to show)";
    });
  }

  stream();
  refresh();
  setInterval(refresh, POLL_MS);
})();
