// engram console: the live panel. Events of the tenant arrive as server-sent events; each becomes a line built with
// textContent (never HTML), linking to the entry it names. No other script runs on the pages.
"use strict";
(function () {
  const panel = document.getElementById("live-panel");
  if (!panel || typeof EventSource === "undefined") return;
  const list = document.getElementById("live");
  const status = document.getElementById("live-status");
  const tenant = panel.dataset.tenant;
  const entryLink = (id) => {
    const a = document.createElement("a");
    a.href = "/t/" + encodeURIComponent(tenant) + "/entry?id=" + encodeURIComponent(id);
    a.textContent = String(id).slice(0, 8);
    return a;
  };
  const say = (kind, parts) => {
    const li = document.createElement("li");
    li.className = "event " + kind;
    li.dataset.kind = kind;
    const when = document.createElement("time");
    when.textContent = new Date().toLocaleTimeString();
    li.append(when, " ");
    for (const part of parts) li.append(part);
    list.prepend(li);
    while (list.children.length > 200) list.lastChild.remove();
  };
  const source = new EventSource(panel.dataset.events);
  source.onopen = () => { status.textContent = "listening"; };
  source.onerror = () => { status.textContent = "reconnecting…"; };
  const on = (kind, render) => source.addEventListener(kind, (message) => {
    let event;
    try { event = JSON.parse(message.data); } catch (e) { return; }
    say(kind, render(event));
  });
  on("entry_created", (e) => ["new entry ", entryLink(e.entry_id), " in " + e.conversation_id +
                              (e.user_id ? " (user " + e.user_id + ")" : "")]);
  on("entries_merged", (e) => ["merged " + e.merged_ids.length + " into ", entryLink(e.kept_id)]);
  on("entry_superseded", (e) => [entryLink(e.entry_id), " superseded by ", entryLink(e.superseded_by)]);
  on("entries_forgotten", (e) => ["forgot " + e.count + " entries (" + e.reason + ")"]);
})();
