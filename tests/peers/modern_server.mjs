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
import { McpServer, acceptedContent, fromJsonSchema, inputRequired } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

const factory = () => {
  const server = new McpServer({ name: 'modern-peer', version: '1.0.0' });
  let added = false;
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
        server.registerTool('added', { description: 'Added at run time' }, async () => ({
          content: [{ type: 'text', text: 'added' }],
        }));
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

serveStdio(factory, { legacy: process.argv.includes('--modern-only') ? 'reject' : 'serve' });
