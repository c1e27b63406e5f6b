// Coffer's console: four pages over the JSON API in coffer/console/api.py. No framework, no build step.
// Everything from the vault or an upstream (names, descriptions, errors) goes into the page as text
// (textContent), never as HTML: a tool description is written by whoever wrote the server.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path, body) {
  const init = { credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  let data = {};
  try { data = await response.json(); } catch (_) { /* an empty or non-JSON answer */ }
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

function notice(text, bad) {
  const box = document.getElementById("notice");
  box.textContent = text;
  box.className = bad ? "bad" : "";
  box.hidden = false;
  clearTimeout(notice.timer);
  notice.timer = setTimeout(() => { box.hidden = true; }, bad ? 8000 : 3000);
}

const fmt = {
  int: (n) => (n === null || n === undefined ? "?" : Number(n).toLocaleString("en-US")),
  ms: (n) => (n === null || n === undefined ? "–" : `${Number(n).toFixed(n < 10 ? 2 : 1)} ms`),
  pct: (n) => `${(100 * n).toFixed(1)}%`,
  mib: (kib) => `${(kib / 1024).toFixed(1)} MiB`,
  ago: (ts) => {
    if (!ts) return "never";
    const s = Date.now() / 1000 - ts;
    if (s < 60) return `${Math.max(0, Math.round(s))} s ago`;
    if (s < 3600) return `${Math.round(s / 60)} min ago`;
    if (s < 86400) return `${Math.round(s / 3600)} h ago`;
    return `${Math.round(s / 86400)} d ago`;
  },
  when: (ts) => new Date(ts * 1000).toLocaleString(),
};

function switchFor(label, checked, onchange, disabled) {
  return el("input", {
    type: "checkbox", role: "switch", class: "switch", "aria-label": label,
    checked: checked, disabled: disabled, onchange,
  });
}

// One state per server, decided by coffer.manage.states (as `coffer list` shows it); its reason is the title.
function stateBadge(state, reason) {
  const kind = {
    ok: "ok", disabled: "", "needs approval": "warn", "tools held": "warn", "needs sign-in": "warn", "not listed yet": "warn",
  }[state];
  return el("span", { class: `badge ${kind === undefined ? "bad" : kind}`, title: reason || null }, state);
}

function diffBlock(text) {
  const pre = el("pre", { class: "diff" });
  for (const line of (text || "").split("\n")) {
    const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : null;
    pre.append(cls ? el("span", { class: cls }, line) : line, "\n");
  }
  return pre;
}

// ---------------------------------------------------------------- servers

// What a server's sandbox lets it do (as `coffer show` says it): the mechanism, then what it may read,
// write and reach, one line each, the rest in the cell's title.
function sandboxCell(lines) {
  if (!lines.length) return el("span", { class: "muted" }, "–");
  const [first, ...rest] = lines;
  return el("div", { title: lines.map(([k, v]) => `${k}: ${v}`).join("\n") },
    el("div", {}, first[1].split(" (")[0]),
    ...rest.map(([k, v]) => el("div", { class: "muted" }, `${k}: ${firstLine(v, 60)}`)));
}

async function serversPage(root) {
  const data = await api("/api/servers");  // the engine's state comes with the rows, asked once
  const rows = data.servers;
  const engine = data.engine;
  const tokens = rows.reduce((sum, r) => sum + (r.enabled ? r.tokens || 0 : 0), 0);
  const waiting = rows.filter((r) => r.state === "needs approval" || r.state === "tools held").length;
  root.append(
    el("h1", {}, "Servers"),
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("b", {}, rows.length), "servers"),
      el("div", { class: "card" }, el("b", {}, rows.reduce((s, r) => s + (r.tools ? r.tools.enabled : 0), 0)), "tools enabled"),
      el("div", { class: "card" }, el("b", {}, fmt.int(tokens)), "tokens of schemas"),
      el("div", { class: "card" }, el("b", {}, waiting), "awaiting approval"),
      el("div", { class: "card" },
        el("b", {}, engine ? `pid ${engine.engine.pid}` : "not running"),
        engine ? `engine: ${engine.sessions.length} session(s), ${fmt.mib(engine.engine.pss_kib)}` : "engine (starts with coffer serve)"),
      el("div", { class: "card", id: "code-mode" },
        el("b", {}, switchFor("code mode (coffer__run)", data.code_mode, async (ev) => {
          await change(() => api("/api/code-mode", { on: ev.target.checked }),
            `code mode ${ev.target.checked ? "on: agents may run scripts that call read-only tools" : "off"}`);
        })),
        data.code_mode ? "code mode: scripts may call the tools counted under “in scripts”" : "code mode (coffer__run) off"),
    ),
  );
  if (!rows.length) {
    root.append(el("p", { class: "muted" }, "No servers yet: find one below, or coffer add NAME -- COMMAND ARGS…"),
      findSection());
    return;
  }
  const body = el("tbody");
  for (const row of rows) {
    const procs = row.processes || [];
    const trouble = ["failed", "down", "did not list"].includes(row.state);
    const lastError = trouble ? row.reason : row.list_error || procs.map((p) => p.last_error).find(Boolean);
    const tr = el("tr", { "data-server": row.name },
      el("td", {}, el("b", {}, row.name), launchLine(row.transport === "http" ? row.url : [row.command, ...row.args].join(" "))),
      el("td", {}, stateBadge(row.state, row.reason)),
      el("td", { class: "process" }, procs.length ? procs.map(processLine) : el("span", { class: "muted" }, "not started")),
      el("td", { class: "num" }, row.tools ? `${row.tools.enabled}/${row.tools.total}` : "?",
        data.code_mode && row.tools ? el("div", { class: "muted script-tools" }, `${row.script_tools} in scripts`) : null),
      el("td", { class: "num" }, fmt.int(row.tokens)),
      el("td", { class: "sandbox" }, sandboxCell(row.sandbox || [])),
      el("td", {}, lastError ? el("span", { class: "error" }, lastError) : el("span", { class: "muted" }, "–")),
      el("td", {}, switchFor(`enable server ${row.name}`, row.enabled, async (ev) => {
        await change(() => api(`/api/servers/${encodeURIComponent(row.name)}/enabled`, { enabled: ev.target.checked }),
          `${row.name} ${ev.target.checked ? "enabled" : "disabled"}`);
      })),
      el("td", {}, (row.state === "needs approval" || row.state === "tools held")
        ? el("button", { class: "primary", onclick: () => toggleReview(row.name, tr) }, "Review")
        : null),
    );
    body.append(tr);
  }
  root.append(el("table", { id: "servers" },
    el("thead", {}, el("tr", {}, ["server", "state", "process", "tools", "tokens", "sandbox", "last error", "enabled", ""].map((h, i) =>
      el("th", { class: i === 3 || i === 4 ? "num" : null }, h)))),
    body), findSection());
}

// ---------------------------------------------------------------- find and add from a registry

function findSection() {
  const results = el("div", { id: "find-results" });
  const input = el("input", {
    type: "search", id: "find", "aria-label": "find servers in the registry",
    placeholder: "what should a server do? (open a pull request, query a postgres database)",
  });
  const form = el("form", {
    class: "toolbar",
    onsubmit: (ev) => { ev.preventDefault(); if (input.value.trim()) runFind(input.value.trim(), results); },
  }, input, el("button", { type: "submit" }, "Find"));
  return el("section", { id: "find-servers" }, el("h2", {}, "Find servers in the registry"), form, results);
}

async function runFind(query, results) {
  results.replaceChildren(el("p", { class: "muted" }, "Searching the registry…"));
  let data;
  try {
    data = await api(`/api/find?q=${encodeURIComponent(query)}&k=10`);
  } catch (err) {
    results.replaceChildren(el("p", { class: "error" }, err.message));
    return;
  }
  const notes = data.notes.map((n) => el("p", { class: "muted note" }, n));
  const ages = data.registries.map((r) => `${r.url}: ${r.entries} servers, read ${r.age}`).join("; ");
  if (!data.servers.length) {
    results.replaceChildren(...notes, el("p", { class: "muted" }, `No server matches (${ages}).`));
    return;
  }
  const body = el("tbody");
  for (const s of data.servers) {
    const what = s.title && s.title !== s.description ? `${s.title}: ${s.description}` : s.description;
    const tr = el("tr", { "data-entry": s.name },
      el("td", {}, el("b", {}, s.short), el("div", { class: "desc" }, s.name)),
      el("td", {}, s.version),
      el("td", {}, s.runs_as.join(", ")),
      el("td", {}, el("div", { class: "desc" }, firstLine(what, 160))),
      el("td", {}, s.installed
        ? el("span", { class: "badge ok" }, `installed as ${s.installed}`)
        : el("button", { class: "primary", onclick: () => showInstall(s, tr) }, "Add…")));
    body.append(tr);
  }
  results.replaceChildren(...notes, el("p", { class: "legend" }, ages),
    el("table", { id: "found" },
      el("thead", {}, el("tr", {}, ["server", "version", "runs as", "what it does", ""].map((h) => el("th", {}, h)))),
      body));
}

async function showInstall(entry, tr) {
  const open = tr.nextElementSibling;
  if (open && open.dataset.install === entry.name) { open.remove(); return; }
  let plan;
  try {
    plan = (await api(`/api/find/plan?name=${encodeURIComponent(entry.name)}&registry=${encodeURIComponent(entry.registry)}`)).plan;
  } catch (err) {
    notice(err.message, true);
    return;
  }
  const vaultName = el("input", { type: "text", value: plan.name, "aria-label": "name in the vault" });
  const start = el("input", { type: "checkbox", checked: true, "aria-label": "start it once to list its tools" });
  const fields = plan.inputs.map((i) => el("label", { class: "input" },
    el("span", {}, i.name, i.required ? " (required)" : " (optional)", i.secret ? ", kept in the secret store" : ""),
    el("input", {
      type: i.secret ? "password" : "text", "data-input": i.name, autocomplete: "off",
      required: i.required && !i.default, placeholder: i.default || "", "aria-label": i.name,
    }),
    i.description ? el("span", { class: "muted" }, i.description) : null));
  const button = el("button", { type: "submit", class: "primary" }, `Add ${entry.short}`);
  const form = el("form", {
    onsubmit: async (ev) => {
      ev.preventDefault();
      const env = {};
      for (const f of form.querySelectorAll("[data-input]")) if (f.value) env[f.dataset.input] = f.value;
      button.disabled = true;
      await change(() => api("/api/servers/add",
        { name: entry.name, registry: entry.registry, as: vaultName.value, env, probe: start.checked }),
      (a) => `added ${a.added}: ${a.launch}`);
    },
  },
  el("p", {}, "Runs ", el("code", {}, plan.launch), ` (${plan.runs_as}, pinned to ${plan.entry.version})`),
  el("label", { class: "input" }, el("span", {}, "name in the vault"), vaultName),
  ...fields,
  el("label", {}, start, " start it once to list its tools"),
  el("div", {}, button));
  tr.after(el("tr", { "data-install": entry.name }, el("td", { colspan: 5 }, el("div", { class: "review" }, form))));
}

function processLine(p) {
  // one line per process the engine holds for this server: shared, or one per session
  const who = p.share === "session" ? ` · session of pid ${p.session}` : "";
  const pids = p.pids.length ? ` · pid ${p.pids.join(" ")} · ${fmt.mib(p.pss_kib)}` : "";
  return el("div", {},
    el("span", { class: `badge ${p.state === "ready" ? "ok" : p.state === "failed" || p.state === "down" ? "bad" : ""}` }, p.state),
    el("span", { class: "muted" }, `${pids}${who}`),
    p.ready_since ? el("div", { class: "muted" }, `up since ${fmt.when(p.ready_since)}${p.restarts ? ` · ${p.restarts} restart(s)` : ""}`) : null);
}

async function toggleReview(name, tr) {
  const next = tr.nextElementSibling;
  if (next && next.classList.contains("review-row")) { next.remove(); return; }
  const data = await api(`/api/servers/${encodeURIComponent(name)}/review`);
  const box = el("div", { class: "review", "data-review": name });
  if (data.config.state !== "approved") {
    box.append(el("h2", {}, `Launch config: ${data.config.state === "new" ? "never approved" : "changed since approval"}`),
      diffBlock(data.config.diff));
  }
  for (const tool of data.tools) {
    box.append(el("h2", {}, `${tool.name}: ${tool.state === "new" ? "new tool" : "definition changed"}`));
    for (const reason of tool.injection) box.append(el("p", { class: "error" }, `held: its ${reason}`));
    box.append(diffBlock(tool.diff));
  }
  box.append(el("button", { class: "primary", onclick: async () => {
    await change(async () => {
      const done = await api(`/api/servers/${encodeURIComponent(name)}/approve`, {});
      return done;
    }, `approved ${name}`);
  } }, `Approve ${name}`));
  tr.after(el("tr", { class: "review-row" }, el("td", { colspan: 8 }, box)));
}

// ---------------------------------------------------------------- tools

async function toolsPage(root) {
  const data = await api("/api/tools");
  const input = el("input", { type: "search", placeholder: "What do you want to do? (the same ranker as coffer search)", "aria-label": "search tools" });
  const results = el("div", { id: "search-results" });
  const filter = el("input", { type: "search", placeholder: "Filter by name or server", "aria-label": "filter tools" });
  const form = el("form", { class: "toolbar", onsubmit: async (ev) => {
    ev.preventDefault();
    await runSearch(input.value, results);
  } }, input, el("button", { class: "primary", type: "submit" }, "Search"));
  const enabled = data.tools.filter((t) => t.enabled && t.server_enabled);
  root.append(
    el("h1", {}, "Tools"),
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("b", {}, data.tools.length), "catalogued"),
      el("div", { class: "card", id: "enabled-count" }, el("b", {}, enabled.length + data.builtins.count),
        `listed: ${enabled.length} enabled + ${data.builtins.count} built-ins`),
      el("div", { class: "card", id: "listed-tokens" },
        el("b", {}, fmt.int(enabled.reduce((s, t) => s + t.tokens, 0) + data.builtins.tokens)),
        "tokens when all are listed (built-ins included, as on Profiles)"),
    ),
    form, results, el("h2", {}, "Every tool"), el("div", { class: "toolbar" }, filter));
  const body = el("tbody");
  for (const tool of data.tools) {
    body.append(el("tr", { "data-tool": tool.name, "data-search": `${tool.name} ${tool.server}`.toLowerCase() },
      el("td", {}, switchFor(`enable ${tool.name}`, tool.enabled, async (ev) => {
        await change(() => api(`/api/tools/${encodeURIComponent(tool.server)}/${encodeURIComponent(tool.tool)}/enabled`,
          { enabled: ev.target.checked }), `${tool.name} ${ev.target.checked ? "enabled" : "disabled"}`);
      }, !tool.server_enabled)),
      el("td", {}, el("b", {}, tool.name), tool.held ? el("span", { class: "badge warn" }, " held") : null),
      el("td", {}, tool.server),
      el("td", { class: "num" }, fmt.int(tool.tokens)),
      el("td", { class: "desc" }, firstLine(tool.description, 160))));
  }
  filter.addEventListener("input", () => {
    const needle = filter.value.trim().toLowerCase();
    for (const tr of body.children) tr.hidden = needle && !tr.dataset.search.includes(needle);
  });
  root.append(el("table", { id: "tools" },
    el("thead", {}, el("tr", {}, ["enabled", "tool", "server", "tokens", "description"].map((h) =>
      el("th", { class: h === "tokens" ? "num" : null }, h)))), body));
}

// a long launch line opens to its whole text (masked as `coffer list` masks it), a short one is shown as is
function launchLine(text, limit = 70) {
  const line = text || "";
  if (line.length <= limit) return el("div", { class: "muted launch" }, line);
  return el("details", { class: "muted launch" }, el("summary", {}, firstLine(line, limit)), el("code", { class: "whole" }, line));
}

function firstLine(text, limit) {
  const line = (text || "").split("\n")[0];
  return line.length > limit ? `${line.slice(0, limit - 1)}…` : line;
}

const PARTS = [["lexical", "#7fa0e8", "BM25"], ["semantic", "#9ccf9c", "meaning"], ["name", "#f2c26b", "name fit"]];
// the page's policy allows no inline style: swatches take a class (console.css), bars an SVG fill

async function runSearch(query, results) {
  results.replaceChildren(el("p", { class: "muted" }, "Searching…"));
  let data;
  try {
    data = await api(`/api/search?q=${encodeURIComponent(query)}&k=10`);
  } catch (err) {
    results.replaceChildren(el("p", { class: "error" }, err.message));
    return;
  }
  // matches the user has not let agents see: how many, why, and what shows them (never the tools)
  const hidden = (data.hidden || []).map((h) => el("p", { class: "muted hidden-matches", "data-server": h.server },
    `${h.count} matching ${h.count === 1 ? "tool is" : "tools are"} ${h.why} (${h.server}): `, el("code", {}, h.fix)));
  if (data.lacking) {  // a service no tool here serves: no tools, what ranked closest, the registry's servers
    const words = data.lacking.map((w) => `'${w}'`).join(", ");
    const closest = data.closest.map((t) => t.name).join(", ");
    results.replaceChildren(el("div", { id: "lacking" },
      el("p", {}, `Nothing in this vault serves ${words}`, closest ? `: closest here is ${closest}.` : "."),
      registryOffers(data.registry)), ...hidden);
    return;
  }
  const offers = data.unknown && data.registry && data.registry.length
    ? el("div", { id: "registry-offers" },
      el("p", { class: "muted" }, `No tool here knows ${data.unknown.map((w) => `'${w}'`).join(", ")}; registry servers that do:`),
      registryOffers(data.registry))
    : null;
  if (!data.tools.length) {
    results.replaceChildren(el("p", { class: "muted" }, `No tool matches (${data.total_searched} searched with ${data.ranker}).`), ...hidden);
    return;
  }
  const top = Math.max(...data.tools.map((t) => t.score), 1e-9);
  const body = el("tbody");
  for (const hit of data.tools) {
    const parts = hit.parts || {};
    const cells = PARTS.filter(([key]) => key in parts).map(([key, , label]) =>
      el("td", { class: "num", "data-part": key }, `${label} ${Number(parts[key]).toFixed(3)}`));
    body.append(el("tr", { "data-hit": hit.name },
      el("td", {}, el("b", {}, hit.name), parts.implied ? el("span", { class: "badge" }, " implied need") : null,
        el("div", { class: "desc" }, firstLine(hit.description, 140))),
      el("td", { class: "num" }, hit.score.toFixed(3)),
      el("td", {}, scoreBar(parts, top)),
      ...cells));
  }
  results.replaceChildren(
    el("div", { class: "legend" }, `${data.ranker} ranker, ${data.total_searched} tools searched`,
      ...PARTS.map(([key, , label]) => el("span", {}, el("i", { class: `sw-${key}` }), label))),
    el("table", { id: "hits" }, body), ...hidden, ...(offers ? [offers] : []));
}

// the registry cache's servers for what the vault lacks, with the line that adds one (the Servers page
// finds and adds them too)
function registryOffers(servers) {
  if (!servers || !servers.length) return el("p", { class: "muted" }, "The registry cache names no server for it.");
  const body = el("tbody");
  for (const offer of servers) {
    body.append(el("tr", { "data-entry": offer.name },
      el("td", {}, el("b", {}, offer.name), el("div", { class: "desc" }, firstLine(offer.about, 140))),
      el("td", {}, el("code", {}, offer.install))));
  }
  return el("table", { class: "offers" }, body);
}

function scoreBar(parts, top) {
  const width = 220;
  const node = svg("svg", { width, height: 14, role: "img", "aria-label": "score parts" });
  let x = 0;
  for (const [key, color] of PARTS) {
    const value = Math.max(0, Number(parts[key] || 0));
    const w = (value / top) * width;
    if (w > 0) node.append(svg("rect", { x, y: 2, width: w, height: 10, fill: color }));
    x += w;
  }
  return node;
}

// ---------------------------------------------------------------- log

async function logPage(root, arg) {
  // arg: the window ("7d"), or { window, member } once a team member is picked
  const window_ = (typeof arg === "object" && arg ? arg.window : arg) || "7d";
  const member = typeof arg === "object" && arg ? arg.member || "" : "";
  const query = `window=${window_}` + (member ? `&member=${encodeURIComponent(member)}` : "");
  const data = await api(`/api/usage?${query}`);
  const seg = el("div", { class: "seg toolbar", role: "group", "aria-label": "time window" },
    ["1h", "24h", "7d", "30d", "90d"].map((w) => el("button", {
      "aria-pressed": String(w === window_), onclick: () => render("log", { window: w, member }),
    }, w)));
  if (data.members.length || member) {  // a team gateway's log: whose calls
    const pick = el("select", { id: "member", "aria-label": "member",
      onchange: (e) => render("log", { window: window_, member: e.target.value }) },
      el("option", { value: "" }, "every member"),
      [...new Set([...data.members, ...(member ? [member] : [])])].map((m) => el("option", { value: m }, m)));
    pick.value = member;
    seg.append(pick);
  }
  const total = data.servers.reduce((s, r) => s + r.count, 0);
  const errors = data.servers.reduce((s, r) => s + r.errors, 0);
  root.append(el("h1", {}, "Invocation log"), seg,
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("b", {}, fmt.int(total)), "calls"),
      el("div", { class: "card" }, el("b", {}, fmt.int(errors)), "failed"),
      el("div", { class: "card" }, el("b", {}, data.tools.length), "tools called"),
      el("div", { class: "card" }, el("b", {}, data.never_called.length), "listed, never called")),
    el("h2", {}, "Calls over time"),
    el("div", { class: "legend" }, el("span", {}, el("i", { class: "sw-calls" }), "calls"),
      el("span", {}, el("i", { class: "sw-failed" }), "failed"),
      el("span", {}, `one bar = ${barWidth(data.timeline.bucket_s)}`)),
    el("div", { class: "chart" }, timelineChart(data.timeline)));
  root.append(el("h2", {}, "Latency and errors per server"),
    el("div", { class: "chart" }, latencyChart(data.servers, (r) => r.server, "latency", "server")),
    statsTable(data.servers, ["server"], "servers-stats"));
  root.append(el("h2", {}, "Per tool (the 12 busiest charted)"),
    el("div", { class: "chart" }, latencyChart(data.tools, (r) => `${r.server} ${r.tool}`, "tool-latency", "tool")),
    statsTable(data.tools, ["server", "tool"], "tools-stats", true));
  root.append(el("h2", {}, `Listed, never called (${data.never_called.length})`),
    data.never_called.length
      ? el("ul", { class: "tools-list", id: "never-called" }, data.never_called.map((t) => el("li", {}, t.name)))
      : el("p", { class: "muted" }, "Every listed tool was called in this window."));
}

function barWidth(seconds) {
  if (seconds % 86400 === 0) return `${seconds / 86400} d`;
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  return `${seconds / 60} min`;
}

function timelineChart(timeline) {
  const points = timeline.points;
  const width = 1000, height = 180, left = 40, bottom = 22;
  const top = Math.max(1, ...points.map((p) => p.calls));
  const step = (width - left) / Math.max(points.length, 1);
  const node = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": "calls over time", id: "timeline" });
  const scale = (n) => (n / top) * (height - bottom - 8);
  node.append(svg("text", { x: 0, y: 12 }, fmt.int(top)), svg("text", { x: 0, y: height - bottom }, "0"));
  points.forEach((p, i) => {
    const x = left + i * step;
    const h = scale(p.calls), hf = scale(p.failures);
    const title = svg("title", {}, `${fmt.when(p.start)}: ${p.calls} calls, ${p.failures} failed`);
    if (h > 0) node.append(svg("rect", { x: x + 1, y: height - bottom - h, width: Math.max(step - 2, 1), height: h, fill: "#7fa0e8", "data-calls": p.calls }, title));
    if (hf > 0) node.append(svg("rect", { x: x + 1, y: height - bottom - hf, width: Math.max(step - 2, 1), height: hf, fill: "#c0392b" }));
  });
  // at most six labels, evenly every `every` bars; a chart longer than a day says the day at each label
  const span = points.length ? points[points.length - 1].start - points[0].start + timeline.bucket_s : 0;
  const every = Math.max(1, Math.ceil(points.length / 6));
  const day = { month: "short", day: "numeric" }, clock = { hour: "2-digit", minute: "2-digit" };
  // counted back from the last bar, so the rightmost label is the bar that holds now (today), not one
  // `every` bars before it
  for (let i = points.length - 1; i >= 0; i -= every) {
    const d = new Date(points[i].start * 1000);
    const text = timeline.bucket_s >= 86400 ? d.toLocaleDateString([], day)
      : span > 86400 ? d.toLocaleString([], { ...day, ...clock }) : d.toLocaleTimeString([], clock);
    node.append(svg("text", { x: left + i * step, y: height - 6, class: "tick", "data-start": points[i].start }, text));
  }
  return node;
}

function latencyChart(rows, label, id, what) {
  const shown = rows.slice(0, 12);
  const width = 1000, row = 22, left = 190;
  const height = Math.max(shown.length * row + 10, 30);
  const top = Math.max(1e-6, ...shown.map((r) => r.p95_ms));
  const node = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": `p50 and p95 latency per ${what}`, id });
  shown.forEach((r, i) => {
    const y = 5 + i * row;
    const w95 = ((width - left - 280) * r.p95_ms) / top, w50 = ((width - left - 280) * r.p50_ms) / top;
    node.append(svg("text", { x: 0, y: y + 13 }, firstLine(label(r), 28)),
      svg("rect", { x: left, y: y + 2, width: Math.max(w95, 1), height: 14, fill: "#c9d6f5" }, svg("title", {}, `p95 ${fmt.ms(r.p95_ms)}`)),
      svg("rect", { x: left, y: y + 5, width: Math.max(w50, 1), height: 8, fill: "#2f5fd0" }, svg("title", {}, `p50 ${fmt.ms(r.p50_ms)}`)),
      svg("text", { x: left + Math.max(w95, 1) + 6, y: y + 13 }, `p50 ${fmt.ms(r.p50_ms)} · p95 ${fmt.ms(r.p95_ms)}${r.errors ? ` · ${r.errors} failed` : ""}`));
  });
  if (!shown.length) node.append(svg("text", { x: 0, y: 18 }, "no calls in this window"));
  return node;
}

function statsTable(rows, keys, id, lastUsed) {
  const head = [...keys, "calls", "failed", "error rate", "p50", "p95", ...(lastUsed ? ["last used"] : [])];
  const body = el("tbody");
  for (const r of rows) {
    body.append(el("tr", {},
      keys.map((k) => el("td", {}, r[k])),
      el("td", { class: "num" }, fmt.int(r.count)), el("td", { class: "num" }, fmt.int(r.errors)),
      el("td", { class: "num" }, fmt.pct(r.error_rate)), el("td", { class: "num" }, fmt.ms(r.p50_ms)),
      el("td", { class: "num" }, fmt.ms(r.p95_ms)), lastUsed ? el("td", {}, fmt.ago(r.last_used)) : null));
  }
  if (!rows.length) body.append(el("tr", {}, el("td", { colspan: head.length, class: "muted" }, "no calls in this window")));
  return el("table", { id }, el("thead", {}, el("tr", {}, head.map((h, i) => el("th", { class: i >= keys.length && h !== "last used" ? "num" : null }, h)))), body);
}

// ---------------------------------------------------------------- profiles

async function profilesPage(root) {
  const data = await api("/api/profiles");
  root.append(el("h1", {}, "Profiles"),
    el("p", { class: "muted" }, "What each client's coffer serve advertises: the tools and what their schemas cost per request. ",
      "Prune writes a profile without the tools no call used in 30 days (coffer profile prune NAME --unused-for 30d); Undo puts it back."));
  const body = el("tbody");
  for (const p of data.profiles) {
    const name = p.name || "(no profile)";
    const actions = p.name ? el("td", { class: "actions" },
      el("button", { onclick: () => pruneProfile(p.name) }, "Prune unused (30 d)"),
      el("button", { onclick: () => change(() => api(`/api/profiles/${encodeURIComponent(p.name)}/undo`, {}), `profile ${p.name} put back`) }, "Undo")) : el("td", {});
    body.append(el("tr", { "data-profile": name },
      el("td", {}, el("b", {}, name), p.hides ? el("div", { class: "muted" }, "the rest through coffer__search_tools") : null),
      el("td", {}, p.mode), el("td", { class: "num" }, fmt.int(p.advertised)), el("td", { class: "num" }, fmt.int(p.tokens)),
      el("td", {}, p.clients.length ? p.clients.join(", ") : el("span", { class: "muted" }, "no client installed with it")),
      el("td", {}, el("details", {}, el("summary", {}, `${p.advertised_tools.length} tools`),
        el("ul", { class: "tools-list" }, p.advertised_tools.map((t) => el("li", {}, t))))),
      actions));
  }
  root.append(el("table", { id: "profiles" },
    el("thead", {}, el("tr", {}, ["profile", "mode", "tools", "tokens", "clients", "advertised", ""].map((h) =>
      el("th", { class: h === "tools" || h === "tokens" ? "num" : null }, h)))), body));
}

async function pruneProfile(name) {
  await change(() => api(`/api/profiles/${encodeURIComponent(name)}/prune`, { unused_for_days: 30 }),
    (done) => `profile ${name} now lists ${done.kept.length} tools called in 30 days; ${done.left_out.length} left out (Undo puts them back)`);
}

// ---------------------------------------------------------------- the frame

const PAGES = { servers: serversPage, tools: toolsPage, log: logPage, profiles: profilesPage };
let current = { page: "servers", arg: undefined };

async function change(work, done) {
  // `done`: the notice, or a function of what the change answered that makes it
  try {
    const answer = await work();
    notice(typeof done === "function" ? done(answer) : done);
  } catch (err) {
    notice(err.message, true);
  }
  await render(current.page, current.arg);
}

async function render(page, arg) {
  current = { page, arg };
  const root = document.getElementById("page");
  root.setAttribute("aria-busy", "true");  // the page on screen is about to be replaced: say so at once
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  const fresh = el("main", { id: "page", "aria-busy": "true", "data-page": page });
  try {
    await PAGES[page](fresh, arg);
  } catch (err) {
    fresh.replaceChildren(el("p", { class: "error" }, err.message));
  }
  fresh.setAttribute("aria-busy", "false");
  root.replaceWith(fresh);
}

function route() {
  const page = location.hash.slice(1);
  render(PAGES[page] ? page : "servers");
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", async () => {
  route();
  try {
    const overview = await api("/api/overview");
    document.getElementById("vault").textContent = overview.registry;
  } catch (_) { /* the page shows the error */ }
});
