// hatloop session report: the iteration list, paged, filtered and expandable.
// Reads the data embedded once in the page; builds every element with textContent, so
// nothing from the session becomes markup. Details are unpacked per page on demand.
(() => {
  "use strict";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const packed = JSON.parse(document.getElementById("report-details").textContent);
  const its = data.its;
  const hats = data.hats;
  const PAGE = data.page;
  const CHUNK = data.chunk;
  const byNumber = new Map(its.map((it, i) => [it.n, i]));
  const open = new Set();
  const chunks = new Map();
  let shown = its.map((_, i) => i);
  let page = 0;

  const $ = (id) => document.getElementById(id);
  function el(tag, cls, ...children) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (const c of children) e.append(c); // strings become text nodes
    return e;
  }

  function secs(s) {
    if (s === 0) return "0s";
    if (s < 1) return s.toFixed(3) + "s";
    if (s < 10) return s.toFixed(2) + "s";
    if (s < 600) return s.toFixed(1) + "s";
    const m = Math.floor(Math.round(s) / 60), r = Math.round(s) % 60;
    if (m < 60) return m + "m " + String(r).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h " + String(m % 60).padStart(2, "0") + "m";
  }
  const money = (c) => (c === undefined ? "-" : "$" + c.toFixed(4));
  const tokens = (it) =>
    it.ti === undefined && it.to === undefined ? "-" : (it.ti || 0) + " / " + (it.to || 0);

  // -- filters -------------------------------------------------------------------------
  const hatSelect = $("filter-hat"), statusSelect = $("filter-status"), topicInput = $("filter-topic");
  for (const [i, name] of hats.entries()) {
    const o = el("option", "", name);
    o.value = String(i);
    hatSelect.append(o);
  }
  function applyFilters() {
    const hat = hatSelect.value, status = statusSelect.value, topic = topicInput.value.trim();
    shown = [];
    its.forEach((it, i) => {
      if (hat !== "" && String(it.h) !== hat) return;
      if (status === "ok" && it.f) return;
      if (status === "failed" && !it.f) return;
      if (topic && !(it.ev || []).some((t) => t.includes(topic))) return;
      shown.push(i);
    });
    page = 0;
    render();
  }
  for (const input of [hatSelect, statusSelect]) input.addEventListener("change", applyFilters);
  topicInput.addEventListener("input", applyFilters);

  // -- details -------------------------------------------------------------------------
  async function unpack(text) {
    if (typeof DecompressionStream === "undefined")
      throw new Error("this browser cannot unpack the details (it has no DecompressionStream)");
    const bin = atob(text);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }
  function details(i) {
    const k = Math.floor(i / CHUNK);
    if (!chunks.has(k)) chunks.set(k, unpack(packed[k]));
    return chunks.get(k).then((list) => list[i % CHUNK]);
  }

  function eventList(events, withSource) {
    if (!events.length) return el("p", "empty", "none");
    const ul = el("ul", "");
    for (const [topic, source, target, payload] of events) {
      const head = el("code", "", topic);
      const li = el("li", "", head);
      if (withSource) li.append(el("span", "kv", " from " + source));
      if (target) li.append(el("span", "kv", " → " + target));
      if (payload !== "") li.append(el("pre", "", payload));
      ul.append(li);
    }
    return ul;
  }
  function callList(calls) {
    const ul = el("ul", "");
    for (const [tool, channel, input, outcome] of calls) {
      const li = el("li", "", el("code", "", tool));
      li.append(el("span", "kv", " via " + channel + " → " + outcome));
      li.append(el("pre", "", input));
      ul.append(li);
    }
    return ul;
  }
  function fillDetail(td, it, d) {
    const facts = [
      "backend " + (d.backend || "-") + (d.ok ? " (ok" : " (failed") +
        (d.exit === undefined ? ")" : ", exit " + d.exit + ")"),
      "its run #" + (d.activation + 1),
      "took " + secs(it.d) + ", from " + secs(it.t0) + " to " + secs(it.t0 + it.d),
    ];
    if (it.c !== undefined) facts.push(money(it.c));
    if (it.ti !== undefined || it.to !== undefined) facts.push("tokens " + tokens(it));
    if (d.turns !== undefined) facts.push(d.turns + " turn(s)");
    if (it.done) facts.push("completed the loop");
    const parts = [el("p", "kv", facts.join(" · "))];
    if (it.r) parts.push(el("h4", "", "Reason"), el("pre", "", it.r));
    parts.push(el("h4", "", "Triggered by"), eventList(d.triggers, true));
    parts.push(el("h4", "", "Events"), eventList(d.events, false));
    if (d.also.length) parts.push(el("h4", "", "Also published"), eventList(d.also, true));
    parts.push(el("h4", "", "Tool calls"), d.calls.length ? callList(d.calls) : el("p", "empty", "none"));
    if (d.tools.length) parts.push(el("h4", "", "Agent used"), el("p", "mono", d.tools.join(", ")));
    if (d.notes.length) parts.push(el("h4", "", "Notes"), el("pre", "", d.notes.join("\n")));
    const text = (cls, value) => (value === "" ? el("p", "empty " + cls, "(empty)") : el("pre", cls, value));
    parts.push(el("h4", "", "Output"), text("output", d.output));
    parts.push(el("h4", "", "Prompt"), text("prompt", d.prompt));
    if (d.meta) parts.push(el("h4", "", "Backend details"), el("pre", "", d.meta));
    td.replaceChildren(...parts);
  }

  // -- the table -----------------------------------------------------------------------
  const tbody = $("iteration-rows"), pager = $("pager");
  function row(i) {
    const it = its[i];
    const tr = el("tr", "it" + (it.f ? " failed" : "") + (open.has(i) ? " open" : ""));
    tr.id = "it-" + it.n;
    const toggle = el("button", "toggle", (open.has(i) ? "▾ " : "▸ ") + it.n);
    toggle.type = "button";
    toggle.setAttribute("aria-expanded", String(open.has(i)));
    const status = it.f ? "failed" + (it.r ? ": " + it.r.split("\n")[0].slice(0, 80) : "") : "ok";
    const cells = [
      el("td", "", toggle),
      el("td", "", hats[it.h]),
      el("td", "status", status),
      el("td", "num", secs(it.t0)),
      el("td", "num", secs(it.d)),
      el("td", "num", money(it.c)),
      el("td", "num", tokens(it)),
      el("td", "mono", (it.ev || []).join(", ") || "-"),
    ];
    tr.append(...cells);
    tr.addEventListener("click", () => {
      if (open.has(i)) open.delete(i); else open.add(i);
      render();
    });
    return tr;
  }
  function detailRow(i) {
    const td = el("td", "detail", el("p", "empty", "Loading…"));
    td.colSpan = 8;
    details(i).then(
      (d) => fillDetail(td, its[i], d),
      (err) => td.replaceChildren(el("p", "empty", String(err.message || err))),
    );
    return el("tr", "detail", td);
  }
  function button(label, target, enabled) {
    const b = el("button", "", label);
    b.type = "button";
    b.disabled = !enabled;
    b.addEventListener("click", () => { page = target; render(); });
    return b;
  }
  function render() {
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    page = Math.min(Math.max(page, 0), pages - 1);
    const first = page * PAGE;
    const slice = shown.slice(first, first + PAGE);
    const rows = [];
    for (const i of slice) {
      rows.push(row(i));
      if (open.has(i)) rows.push(detailRow(i));
    }
    tbody.replaceChildren(...rows);
    const summary = el("span", "", shown.length
      ? "showing " + (first + 1) + "–" + (first + slice.length) + " of " + shown.length
      : "no iteration matches");
    if (shown.length !== its.length) summary.append(" (filtered from " + its.length + ")");
    summary.id = "pager-summary";
    pager.replaceChildren(
      button("« first", 0, page > 0), button("‹ prev", page - 1, page > 0),
      el("span", "", "page " + (page + 1) + " of " + pages),
      button("next ›", page + 1, page < pages - 1), button("last »", pages - 1, page < pages - 1),
      summary,
    );
    $("shown-count").textContent = String(shown.length);
  }

  // -- links: #it-N opens iteration N, #failed lists the failed ones --------------------
  function follow() {
    const hash = decodeURIComponent(location.hash.slice(1));
    if (hash === "failed") {
      statusSelect.value = "failed";
      applyFilters();
      $("iterations").scrollIntoView();
      return;
    }
    const m = /^it-(\d+)$/.exec(hash);
    if (!m || !byNumber.has(Number(m[1]))) return;
    const i = byNumber.get(Number(m[1]));
    if (!shown.includes(i)) {
      hatSelect.value = statusSelect.value = topicInput.value = "";
      applyFilters();
    }
    page = Math.floor(shown.indexOf(i) / PAGE);
    open.add(i);
    render();
    const target = $("it-" + m[1]);
    if (target) target.scrollIntoView({ block: "start" });
  }
  window.addEventListener("hashchange", follow);
  render();
  follow();
  document.body.dataset.ready = "true";
})();
