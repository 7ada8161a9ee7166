// fenceview page: fences as SVG coloured by occupancy, a live trigger list,
// and details on click. No dependencies, no network beyond this server.
"use strict";
(function () {
  const W = 1000, H = 700, PAD = 24, POLL_MS = 2000, MAX_TRIGGERS = 100;
  const SVGNS = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);
  const state = { version: null, ids: "", shapes: new Map(), selected: null, maxCount: 1 };

  function el(tag, attrs, text) {
    const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
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

  // Equirectangular projection fitted to the catalogue bounds: x scaled by
  // cos(mid latitude) so shapes keep their proportions.
  function projection(b) {
    const k = Math.cos(((b.south + b.north) / 2) * Math.PI / 180);
    const w = Math.max((b.east - b.west) * k, 1e-9), h = Math.max(b.north - b.south, 1e-9);
    const s = Math.min((W - 2 * PAD) / w, (H - 2 * PAD) / h);
    const ox = (W - w * s) / 2, oy = (H - h * s) / 2;
    return {
      xy: (lon, lat) => [ox + (lon - b.west) * k * s, oy + (b.north - lat) * s],
      metres: (m) => (m / 111320) * s,
    };
  }

  function ringPath(ring, p) {
    return ring.map((pos, i) => {
      const [x, y] = p.xy(pos[0], pos[1]);
      return (i === 0 ? "M" : "L") + x.toFixed(1) + " " + y.toFixed(1);
    }).join("") + "Z";
  }

  function shapeFor(f, p) {
    const g = f.geometry || {};
    if (g.type === "Point") {
      const [cx, cy] = p.xy(g.coordinates[0], g.coordinates[1]);
      return { node: el("svg:circle", { class: "shape", cx: cx.toFixed(1), cy: cy.toFixed(1), r: Math.max(p.metres(f.radius_m), 4).toFixed(1) }), cx, cy };
    }
    const polys = g.type === "MultiPolygon" ? g.coordinates : g.type === "Polygon" ? [g.coordinates] : [];
    const d = polys.map((poly) => poly.map((ring) => ringPath(ring, p)).join("")).join("");
    const [x1, y1] = p.xy(f.bounds.west, f.bounds.north), [x2, y2] = p.xy(f.bounds.east, f.bounds.south);
    return { node: el("svg:path", { class: "shape", d: d, "fill-rule": "evenodd" }), cx: (x1 + x2) / 2, cy: (y1 + y2) / 2 };
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

  function area(f) { return Math.abs((f.bounds.north - f.bounds.south) * (f.bounds.east - f.bounds.west)); }

  function render(list) {
    const root = $("fences");
    root.replaceChildren();
    state.shapes.clear();
    if (!list.bounds) return;
    const p = projection(list.bounds);
    // Large fences first, so small ones stay clickable on top.
    const fences = list.fences.slice().sort((a, b) => area(b) - area(a));
    for (const f of fences) {
      const { node, cx, cy } = shapeFor(f, p);
      const g = el("svg:g", { class: "fence", "data-fence-id": f.id, "data-count": String(f.count), tabindex: "0" });
      const title = el("svg:title", {}, f.name + " (" + f.id + ")");
      const label = el("svg:text", { x: cx.toFixed(1), y: cy.toFixed(1), class: "count-label" }, String(f.count));
      g.append(node, title, label);
      g.addEventListener("click", () => select(f.id));
      g.addEventListener("keydown", (e) => { if (e.key === "Enter") select(f.id); });
      root.append(g);
      state.shapes.set(f.id, { g, node, label, title, name: f.name });
    }
  }

  function updateCounts(list) {
    state.maxCount = Math.max(1, ...list.fences.map((f) => f.count));
    $("legend-max").textContent = String(state.maxCount);
    let total = 0;
    for (const f of list.fences) {
      total += f.count;
      const s = state.shapes.get(f.id);
      if (!s) continue;
      s.g.setAttribute("data-count", String(f.count));
      s.node.style.fill = colour(f.count);
      s.label.textContent = String(f.count);
      s.title.textContent = f.name + " (" + f.id + "): " + f.count + " inside";
    }
    $("summary").textContent = list.total + " fences · " + total + " inside · catalogue v" + list.catalogue_version;
  }

  async function refresh() {
    try {
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
      setStatus("ready", false);
      document.body.dataset.loaded = "true";
    } catch (e) {
      setStatus(e.status === 503 ? e.message : "error: " + e.message, true);
    }
  }

  function markSelected(id) {
    for (const [fid, s] of state.shapes) s.g.classList.toggle("selected", fid === id);
  }

  function kv(dl, k, v) { dl.append(el("dt", {}, k), el("dd", {}, v)); }

  function fmtTime(ms) { return ms ? new Date(ms).toLocaleString() : "–"; }

  async function select(id) {
    state.selected = id;
    document.dispatchEvent(new CustomEvent("fence-selected", { detail: id })); // visits.js
    markSelected(id);
    const box = $("details");
    box.dataset.fenceId = id;
    $("device").replaceChildren();
    try {
      const f = await getJSON("/v1/fences/" + encodeURIComponent(id));
      if (state.selected !== id) return;
      const dl = el("dl");
      kv(dl, "name", f.name || "–");
      kv(dl, "id", f.id);
      kv(dl, "kind", f.kind || "–");
      kv(dl, "inside", String(f.count));
      kv(dl, "enters / exits", f.enters_total + " / " + f.exits_total);
      kv(dl, "dwells", String(f.dwells_total));
      kv(dl, "last change", fmtTime(f.last_change_ms));
      kv(dl, "partition", String(f.partition) + (f.lag_records !== undefined ? " (lag " + f.lag_records + ")" : ""));
      kv(dl, "catalogue", "v" + f.catalogue_version);
      const ul = el("ul", { id: "devices" });
      for (const d of f.devices) {
        const li = el("li", { "data-device-id": d }, d);
        li.addEventListener("click", () => showDevice(d));
        ul.append(li);
      }
      const head = el("h2", {}, "Inside" + (f.devices_truncated ? " (first " + f.devices.length + " of " + f.count + ")" : " (" + f.devices.length + ")"));
      box.replaceChildren(dl, head, ul);
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
      box.replaceChildren(el("h2", {}, "Device"), dl);
      box.dataset.deviceId = id;
    } catch (e) {
      box.replaceChildren(el("p", { class: "hint" }, e.message));
    }
  }

  function addTrigger(t) {
    const li = el("li", { class: t.type, "data-trigger-id": t.trigger_id, "data-fence-id": t.fence_id, "data-device-id": t.device_id });
    const when = el("time", { datetime: t.event_time || "" }, t.event_time_ms ? new Date(t.event_time_ms).toLocaleTimeString() : "");
    const fence = state.shapes.get(t.fence_id);
    li.append(when, el("span", { class: "type" }, t.type), document.createTextNode(t.device_id + " → " + (fence ? fence.name : t.fence_id)));
    const list = $("triggers");
    list.prepend(li);
    while (list.children.length > MAX_TRIGGERS) list.lastElementChild.remove();
    if (fence) {
      fence.g.classList.add("flash");
      setTimeout(() => fence.g.classList.remove("flash"), 800);
    }
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
    es.addEventListener("dropped", (e) => {
      $("stream-state").textContent = "live (some triggers dropped: too many to show)";
    });
  }

  stream();
  refresh();
  setInterval(refresh, POLL_MS);
})();
