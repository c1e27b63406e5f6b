// The members' console: who you are to the gateway, your secrets (names only), what you reach.
"use strict";

const $ = (id) => document.getElementById(id);

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const answer = await fetch("/console/api" + path, init);
  const data = await answer.json();
  if (answer.status === 401) {
    window.location.assign("/console/login");
  }
  if (!answer.ok) {
    throw new Error(data.error || answer.statusText);
  }
  return data;
}

function placeholder(text) {
  const none = document.createElement("li");
  none.textContent = text;
  return none;
}

// One list item: the name, what else it shows, and a button whose action's error is said, not thrown.
function row(name, label, action, ...shown) {
  const item = document.createElement("li");
  const code = document.createElement("code");
  code.textContent = name;
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = label;
  button.dataset.name = name;
  button.addEventListener("click", async () => {
    try {
      await action();
    } catch (err) {
      $("said").textContent = err.message;
    }
  });
  item.append(code, " ", ...shown.flatMap((el) => [el, " "]), button);
  return item;
}

function listSecrets(names) {
  const list = $("secrets");
  list.replaceChildren();
  if (!names.length) {
    list.append(placeholder("none yet"));
  }
  for (const name of names) {
    list.append(row(name, "Remove", async () => {
      listSecrets((await api("DELETE", "/secrets/" + encodeURIComponent(name), {})).secrets);
      $("said").textContent = `Removed ${name}.`;
    }));
  }
}

function listGrants(grants) {
  const list = $("grants");
  list.replaceChildren();
  const names = Object.keys(grants);
  if (!names.length) {
    list.append(placeholder("none to connect"));
  }
  for (const name of names) {
    const connected = grants[name] === "authorised";
    const state = document.createElement("span");
    state.className = "state";
    state.textContent = connected ? "connected" : `not connected (${grants[name]})`;
    const path = "/connect/" + encodeURIComponent(name);
    list.append(row(name, connected ? "Disconnect" : "Connect", async () => {
      if (connected) {
        await api("DELETE", path, {});
        $("said").textContent = `Disconnected ${name}.`;
        await load();
        return;
      }
      const answer = await api("POST", path, {});
      if (answer.authorize) {
        window.location.assign(answer.authorize);  // its authorization server, then back here
        return;
      }
      $("said").textContent = `Connected ${name}.`;
      await load();
    }, state));
  }
}

async function load() {
  const me = await api("GET", "/me");
  $("sub").textContent = me.sub;
  $("via").textContent = me.via;
  $("profile").textContent = me.profile || "the whole vault";
  listSecrets(me.secrets);
  listGrants(me.grants);
  const tools = $("tools");
  tools.replaceChildren(...me.tools.map((name) => {
    const item = document.createElement("li");
    item.textContent = name;
    return item;
  }));
}

$("set").addEventListener("submit", async (event) => {
  event.preventDefault();
  const name = $("name").value.trim();
  try {
    const answer = await api("PUT", "/secrets/" + encodeURIComponent(name), { value: $("value").value });
    listSecrets(answer.secrets);
    $("value").value = "";
    $("said").textContent = `Saved ${name}: your servers that use it start again with it.`;
  } catch (err) {
    $("said").textContent = err.message;
  }
});

$("signout").addEventListener("click", async () => {
  await api("POST", "/logout", {});
  window.location.assign("/console/login");
});

load().catch((err) => { $("said").textContent = err.message; });
