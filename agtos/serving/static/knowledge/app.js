// Knowledge page: entity search, detail (episodes, conclusions, relationship graph), edit and merge.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const PAGE = 50;
  const state = { user: localStorage.getItem("agtos.user") || "default", offset: 0, selected: null, timer: 0 };
  state.key = sessionStorage.getItem("agtos.key") || "";  // an API key lives for this tab only

  function toast(message, error) {
    const el = $("toast");
    el.textContent = message;
    el.className = error ? "toast error" : "toast";
    el.hidden = false;
    clearTimeout(el._t);
    el._t = setTimeout(() => { el.hidden = true; }, 3500);
  }

  async function api(path, options = {}) {
    const headers = {
      ...(state.user ? { "X-User-Id": state.user } : {}),  // blank: the key's own user (or the default)
      ...(state.key ? { Authorization: `Bearer ${state.key}` } : {}),
      ...(options.body ? { "Content-Type": "application/json" } : {}),
    };
    const sentKey = state.key;
    const res = await fetch(path, { ...options, headers });
    const body = await res.json().catch(() => ({}));
    // A 401 to a request sent before the current key was entered is stale: send it again with that key.
    if (res.status === 401 && sentKey !== state.key) return api(path, options);
    if (res.status === 401) askForKey();
    if (!res.ok) throw new Error(body.message || `request failed (${res.status})`);
    return body;
  }

  // The API answered 401: auth is on. Show the key field; the key is sent as a bearer token.
  function askForKey() {
    const form = $("key-form");
    if (!form.hidden) return;
    form.hidden = false;
    $("key").focus();
  }

  function useKey(ev) {
    ev.preventDefault();
    state.key = $("key").value.trim();
    sessionStorage.setItem("agtos.key", state.key);
    $("key").value = "";
    $("key-form").hidden = true;
    refresh();
  }

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "onclick") node.onclick = v; else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c);
    return node;
  }

  const badge = (type) => el("span", { class: `badge ${type}` }, type);
  const when = (ms) => new Date(ms).toLocaleString();

  async function loadStats() {
    const s = await api("/api/entities/stats");
    const parts = Object.entries(s.byType).filter(([, n]) => n).map(([t, n]) => `${n} ${t}`);
    $("stats").textContent = `${s.total} entities` + (parts.length ? ` · ${parts.join(", ")}` : "");
  }

  async function loadList(append = false) {
    state.offset = append ? state.offset : 0;
    const params = new URLSearchParams({ limit: PAGE, offset: state.offset });
    const q = $("search").value.trim();
    if (q) params.set("q", q);
    if ($("type-filter").value) params.set("type", $("type-filter").value);
    const page = await api(`/api/entities?${params}`);
    const list = $("entity-list");
    if (!append) list.replaceChildren();
    for (const e of page.entities) {
      const item = el("li", { "data-id": e.id, onclick: () => select(e.id) },
        el("span", {}, e.name, " ", badge(e.type)), el("span", { class: "count" }, `${e.episodeCount} ep`));
      if (e.id === state.selected) item.classList.add("active");
      list.append(item);
    }
    if (!list.children.length) list.append(el("li", { class: "empty" }, q ? "No matches." : "No entities yet."));
    state.offset = page.nextOffset || 0;
    $("more").hidden = page.nextOffset == null;
  }

  function refresh() {
    loadList().catch((e) => toast(e.message, true));
    loadStats().catch((e) => toast(e.message, true));
  }

  function showMeta(e) {
    const rows = [
      ["Aliases", e.aliases.length ? e.aliases.join(", ") : "—"],
      ["Confidence", e.confidence.toFixed(2)],
      ["First seen", when(e.firstSeen)],
      ["Last seen", when(e.lastSeen)],
      ["Episodes", String(e.episodeCount)],
    ];
    $("entity-meta").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  async function select(id) {
    state.selected = id;
    document.querySelectorAll("#entity-list li").forEach((li) => li.classList.toggle("active", li.dataset.id === id));
    try {
      const [{ entity }, rels, eps, cons] = await Promise.all([
        api(`/api/entities/${id}`), api(`/api/entities/${id}/relationships`),
        api(`/api/entities/${id}/episodes`), api(`/api/entities/${id}/conclusions`),
      ]);
      $("empty").hidden = true;
      $("entity").hidden = false;
      $("edit-form").hidden = true;
      $("entity-name").textContent = entity.name;
      $("entity-type").replaceWith(Object.assign(badge(entity.type), { id: "entity-type" }));
      state.entity = entity;
      showMeta(entity);
      $("relationships").replaceChildren(...(rels.relationships.length ? rels.relationships.map(relRow)
        : [el("li", { class: "empty" }, "No relationships.")]));
      window.KnowledgeGraph.render($("graph"), entity, rels.relationships, select);
      $("episodes").replaceChildren(...(eps.episodes.length ? eps.episodes.map((ep) => el("li", {},
        el("span", { class: "when" }, when(ep.timestamp)), ep.summary)) : [el("li", { class: "empty" }, "No stored episodes.")]));
      $("conclusions").replaceChildren(...(cons.conclusions.length ? cons.conclusions.map((c) => el("li", {},
        el("span", { class: "when" }, `${c.type || ""} ${c.confidence != null ? c.confidence.toFixed(2) : ""}`), c.text))
        : [el("li", { class: "empty" }, "No conclusions mention it.")]));
      await loadMergeChoices(entity);
    } catch (e) {
      toast(e.message, true);
    }
  }

  function relRow(r) {
    const other = el("span", {}, el("a", { onclick: () => select(r.other.id) }, r.other.name), " ", badge(r.other.type));
    const type = el("span", { class: "rel-type" }, r.type);
    const ends = r.direction === "out" ? [state.entity.name, type, other] : [other, type, state.entity.name];
    return el("li", { "data-type": r.type, "data-direction": r.direction }, ...ends);
  }

  async function loadMergeChoices(entity) {
    const page = await api("/api/entities?limit=100");
    const choices = page.entities.filter((e) => e.id !== entity.id);
    $("merge-select").replaceChildren(el("option", { value: "" }, "Choose the duplicate…"),
      ...choices.map((e) => el("option", { value: e.id }, `${e.name} (${e.type})`)));
  }

  function startEdit() {
    const e = state.entity;
    $("edit-name").value = e.name;
    $("edit-type").value = e.type;
    $("edit-aliases").value = e.aliases.join(", ");
    $("edit-form").hidden = false;
  }

  async function saveEdit(ev) {
    ev.preventDefault();
    const aliases = $("edit-aliases").value.split(",").map((a) => a.trim()).filter(Boolean);
    const body = { name: $("edit-name").value.trim(), type: $("edit-type").value, aliases };
    try {
      await api(`/api/entities/${state.selected}`, { method: "PUT", body: JSON.stringify(body) });
      toast("Saved.");
      refresh();
      await select(state.selected);
    } catch (e) { toast(e.message, true); }
  }

  async function merge(ev) {
    ev.preventDefault();
    const duplicate = $("merge-select").value;
    if (!duplicate) return toast("Choose the duplicate to merge.", true);
    try {
      const res = await api(`/api/entities/${state.selected}/merge`, { method: "POST", body: JSON.stringify({ duplicate_id: duplicate }) });
      const n = res.relationships.moved + res.relationships.merged;
      toast(`Merged; ${n} relationship${n === 1 ? "" : "s"} moved over.`);
      refresh();
      await select(state.selected);
    } catch (e) { toast(e.message, true); }
  }

  async function remove() {
    if (!window.confirm(`Delete ${state.entity.name}?`)) return;
    try {
      await api(`/api/entities/${state.selected}`, { method: "DELETE" });
      state.selected = null;
      $("entity").hidden = true;
      $("empty").hidden = false;
      refresh();
    } catch (e) { toast(e.message, true); }
  }

  function init() {
    $("user").value = state.user;
    $("user").addEventListener("change", () => {
      state.user = $("user").value.trim();
      localStorage.setItem("agtos.user", state.user);
      state.selected = null;
      $("entity").hidden = true;
      $("empty").hidden = false;
      refresh();
    });
    $("search").addEventListener("input", () => {
      clearTimeout(state.timer);
      state.timer = setTimeout(() => loadList().catch((e) => toast(e.message, true)), 200);
    });
    $("type-filter").addEventListener("change", () => loadList().catch((e) => toast(e.message, true)));
    $("more").addEventListener("click", () => loadList(true).catch((e) => toast(e.message, true)));
    $("edit-btn").addEventListener("click", startEdit);
    $("edit-cancel").addEventListener("click", () => { $("edit-form").hidden = true; });
    $("edit-form").addEventListener("submit", saveEdit);
    $("merge-form").addEventListener("submit", merge);
    $("delete-btn").addEventListener("click", remove);
    $("key-form").addEventListener("submit", useKey);
    refresh();
  }

  init();
})();
