// Visits panel: the selected fence's hourly ENTERs and mean dwell, and its
// latest visits, from /v1/fences/{id}/visits (processors/visits). Self-contained:
// it listens for the "fence-selected" event the page dispatches.
(function () {
  "use strict";
  const aside = document.querySelector("aside");
  if (!aside) return;
  const panel = document.createElement("section");
  panel.id = "visits-panel";
  panel.innerHTML = '<h2>Visits <small>last 24 h, hourly</small></h2><div id="visits"><p class="hint">Click a fence.</p></div>';
  aside.appendChild(panel);
  const box = panel.querySelector("#visits");
  let selected = null;

  function text(tag, s) { const e = document.createElement(tag); e.textContent = s; return e; }
  function dur(s) { return s >= 3600 ? (s / 3600).toFixed(1) + " h" : s >= 60 ? Math.round(s / 60) + " min" : Math.round(s) + " s"; }

  async function load() {
    const id = selected;
    if (!id) return;
    let data;
    try {
      const r = await fetch("/v1/fences/" + encodeURIComponent(id) + "/visits");
      if (!r.ok) { box.replaceChildren(text("p", r.status === 404 ? "No visits." : "Visits unavailable (" + r.status + ").")); return; }
      data = await r.json();
    } catch (e) { box.replaceChildren(text("p", "Visits unavailable.")); return; }
    if (id !== selected) return;
    const max = Math.max(1, ...data.hours.map(h => h.enters));
    const table = document.createElement("table");
    table.className = "visits-hours";
    table.append(Object.assign(document.createElement("tr"), { innerHTML: "<th>hour (UTC)</th><th>ENTERs</th><th></th><th>visits</th><th>mean dwell</th>" }));
    for (const h of data.hours.slice(-24)) {
      const tr = document.createElement("tr");
      if (!h.final) tr.className = "open";
      const bar = text("td", "");
      bar.append(Object.assign(document.createElement("span"), { className: "bar", style: "width:" + Math.round(60 * h.enters / max) + "px" }));
      tr.append(text("td", h.start.slice(11, 16) + (h.final ? "" : " …")), text("td", String(h.enters)), bar,
        text("td", String(h.visits)), text("td", h.visits ? dur(h.mean_dwell_s) : "–"));
      table.append(tr);
    }
    const parts = [data.hours.length ? table : text("p", "No ENTERs in the last 24 h.")];
    if (data.late_enters || data.late_visits) parts.push(text("p", "late records dropped: " + (data.late_enters + data.late_visits)));
    if (data.recent.length) {
      const ul = document.createElement("ul");
      ul.className = "visits-recent";
      for (const v of data.recent.slice(0, 8)) ul.append(text("li", v.device_id + " · " + dur(v.duration_s) + " · left " + new Date(v.left).toLocaleTimeString() + " (" + v.exit_reason.replace("TRIGGER_REASON_", "").toLowerCase() + ")"));
      parts.push(text("h3", "Latest visits"), ul);
    }
    box.replaceChildren(...parts);
  }

  document.addEventListener("fence-selected", e => { selected = e.detail; load(); });
  setInterval(load, 10000);
})();
