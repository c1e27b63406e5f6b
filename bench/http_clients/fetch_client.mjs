// A kept-alive MCP client as Node hosts make one: global fetch (undici keeps the connection alive).
// Usage: node fetch_client.mjs URL TOOL CALLS [TOKEN]; prints one JSON line: {"ms": [per-call milliseconds]}.
const [url, tool, callsArg, token] = process.argv.slice(2);
const calls = Number(callsArg);
const base = { "content-type": "application/json", accept: "application/json, text/event-stream" };
if (token) base.authorization = `Bearer ${token}`;
let session = null;
let id = 0;

function headers() {
  return session ? { ...base, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" } : base;
}

async function post(body) {
  const response = await fetch(url, { method: "POST", headers: headers(), body: JSON.stringify(body) });
  session = response.headers.get("mcp-session-id") ?? session;
  const text = await response.text(); // the whole body: SSE or JSON
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${text}`);
  return text;
}

await post({
  jsonrpc: "2.0", id: ++id, method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "bench-fetch", version: "1" } },
});
await post({ jsonrpc: "2.0", method: "notifications/initialized" });
const ms = [];
for (let i = 0; i < calls; i++) {
  const t0 = performance.now();
  const text = await post({ jsonrpc: "2.0", id: ++id, method: "tools/call", params: { name: tool, arguments: { text: `call ${i}` } } });
  ms.push(performance.now() - t0);
  if (!text.includes(`call ${i}`)) throw new Error(`unexpected answer: ${text.slice(0, 200)}`);
}
process.stdout.write(JSON.stringify({ ms }) + "\n");
