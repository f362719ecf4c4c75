// An MCP 2026-07-28 server over stdio, built with the official TypeScript
// SDK v2 (@modelcontextprotocol/server), with `add_tool` (registers `added`:
// a list change, which a 2026 client hears on subscriptions/listen),
// `echo {text}`, and
// `greet`, which asks the client for a name the 2026 way (an input_required
// result whose retry brings it; SEP-2322) and answers "Hello, NAME!"
// ("Hello, stranger!" when the client declined or gave none).
//   --modern-only  refuse a 2025-era opening (initialize) with the
//                  unsupported-protocol-version error, so only a client
//                  that speaks 2026-07-28 gets anywhere
//   --http PORT    serve streamable HTTP on 127.0.0.1:PORT (0: any) at /mcp
//                  instead (the SDK's createMcpHandler; list changes go to
//                  the subscriptions/listen streams open then), and print
//                  "listening on http://127.0.0.1:N/mcp"
import { createServer } from 'node:http';
import { McpServer, acceptedContent, createMcpHandler, fromJsonSchema, inputRequired } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

const httpAt = process.argv.indexOf('--http');
const legacy = process.argv.includes('--modern-only') ? 'reject' : 'serve';
// Over HTTP a server instance serves one request: what was added lives here.
let added = false;
let handler;
const registerAdded = (server) =>
  server.registerTool('added', { description: 'Added at run time' }, async () => ({
    content: [{ type: 'text', text: 'added' }],
  }));

const factory = () => {
  const server = new McpServer({ name: 'modern-peer', version: '1.0.0' });
  if (added && handler) registerAdded(server);
  server.registerTool(
    'echo',
    {
      description: 'Echoes the text back',
      inputSchema: fromJsonSchema({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }),
    },
    async ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }),
  );
  server.registerTool(
    'add_tool',
    { description: 'Registers the tool `added` (a list change)', inputSchema: fromJsonSchema({ type: 'object', properties: {} }) },
    async () => {
      if (!added) {
        added = true;
        if (handler) handler.notify.toolsChanged();
        else registerAdded(server);
      }
      return { content: [{ type: 'text', text: 'ok' }] };
    },
  );
  server.registerTool(
    'greet',
    { description: 'Asks for a name, then greets', inputSchema: fromJsonSchema({ type: 'object', properties: {} }) },
    async (_args, ctx) => {
      const answered = ctx.mcpReq.inputResponses?.user_name !== undefined;
      const answer = acceptedContent(ctx.mcpReq.inputResponses, 'user_name');
      if (!answered)
        return inputRequired({
          inputRequests: {
            user_name: inputRequired.elicit({
              message: 'What is your name?',
              requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
            }),
          },
          requestState: 'greet-round-1',
        });
      // A client that declined, or accepted without a name, is greeted all the same.
      const name = typeof answer?.name === 'string' ? answer.name : 'stranger';
      return { content: [{ type: 'text', text: `Hello, ${name}!` }] };
    },
  );
  return server;
};

if (httpAt < 0) {
  serveStdio(factory, { legacy });
} else {
  handler = createMcpHandler(factory, { legacy });
  const http = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    try {
      const response = await handler.fetch(
        new Request(`http://${req.headers.host}${req.url}`, {
          method: req.method,
          headers: Object.entries(req.headers).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]])),
          body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
          signal: abort.signal,
        }),
      );
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (!response.body) return res.end();
      for await (const chunk of response.body) res.write(chunk);
      res.end();
    } catch (e) {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  });
  http.listen(Number(process.argv[httpAt + 1] ?? 0), '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${http.address().port}/mcp`);
  });
}
