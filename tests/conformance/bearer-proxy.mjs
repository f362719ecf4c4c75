// Forwards every request to TARGET (http://HOST:PORT) with
// `Authorization: Bearer <the first line of TOKEN_FILE>` added, streaming
// both ways. The conformance suite's clients send no headers of their own,
// and the daemon answers no request without the owner's token: this is the
// header a configured client (Claude Code --header, VS Code "headers")
// sends. Prints "listening on http://127.0.0.1:PORT" once it listens.
//   node bearer-proxy.mjs TARGET TOKEN_FILE
import { readFileSync } from "node:fs";
import http from "node:http";

const [target, tokenFile] = process.argv.slice(2);
if (!target || !tokenFile) {
  console.error("usage: node bearer-proxy.mjs http://HOST:PORT TOKEN_FILE");
  process.exit(2);
}
const upstream = new URL(target);
const token = readFileSync(tokenFile, "utf8").split("\n")[0].trim();

// Host and Origin name this proxy's port; they are passed on naming the
// daemon's instead, and otherwise unchanged, so that the suite's checks of
// the daemon's Host and Origin rules (DNS rebinding) still test the daemon.
const ownPort = () => `:${server.address().port}`;
const retarget = (value) =>
  typeof value === "string" && value.endsWith(ownPort())
    ? value.slice(0, -ownPort().length) + `:${upstream.port}`
    : value;

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  if (headers.host !== undefined) headers.host = retarget(headers.host);
  if (headers.origin !== undefined) headers.origin = retarget(headers.origin);
  const out = http.request(
    { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  out.on("error", (e) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
    res.end(`bearer-proxy: ${e.message}`);
  });
  req.pipe(out);
  // A client that goes away ends the upstream request too (an SSE stream).
  res.on("close", () => out.destroy());
});
server.listen(0, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
