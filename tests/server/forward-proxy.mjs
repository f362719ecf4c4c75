// A forward proxy for the tests of mcprt's HTTP client: plain HTTP requests
// in absolute form, and CONNECT tunnels (for https). Every host name ending
// in `.test` is taken to 127.0.0.1, so a test can name a server that only a
// request through this proxy can reach. Prints "listening PORT" once it
// listens, then one line per request it forwards: "GET http://..." or
// "CONNECT host:port". With --auth USER:PASS it demands that Basic
// Proxy-Authorization (407 otherwise).
//   node forward-proxy.mjs [--auth USER:PASS]
import http from "node:http";
import net from "node:net";

const args = process.argv.slice(2);
const authIndex = args.indexOf("--auth");
const expected = authIndex >= 0 ? "Basic " + Buffer.from(args[authIndex + 1]).toString("base64") : null;

const resolve = (host) => (host.endsWith(".test") ? "127.0.0.1" : host);
const authorized = (req) => expected === null || req.headers["proxy-authorization"] === expected;

const server = http.createServer((req, res) => {
  if (!authorized(req)) {
    res.writeHead(407, { "Proxy-Authenticate": 'Basic realm="test"' }).end();
    return;
  }
  let url;
  try {
    url = new URL(req.url);
  } catch {
    res.writeHead(400).end("absolute URL expected\n");
    return;
  }
  console.log(`${req.method} ${req.url}`);
  const headers = { ...req.headers };
  delete headers["proxy-authorization"];
  delete headers["proxy-connection"];
  const upstream = http.request(
    { host: resolve(url.hostname), port: url.port || 80, method: req.method, path: url.pathname + url.search, headers },
    (up) => {
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
    },
  );
  upstream.on("error", () => res.headersSent ? res.destroy() : res.writeHead(502).end());
  req.pipe(upstream);
  res.on("close", () => upstream.destroy());
});

server.on("connect", (req, client, head) => {
  if (!authorized(req)) {
    client.end("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\n\r\n");
    return;
  }
  console.log(`CONNECT ${req.url}`);
  const [host, port] = [req.url.slice(0, req.url.lastIndexOf(":")), req.url.slice(req.url.lastIndexOf(":") + 1)];
  const upstream = net.connect(Number(port), resolve(host), () => {
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.length) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  upstream.on("error", () => client.end("HTTP/1.1 502 Bad Gateway\r\n\r\n"));
  client.on("error", () => upstream.destroy());
});

server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
