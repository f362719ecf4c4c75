// An MCP 2026-07-28 server over stdio, built with the official TypeScript
// SDK v2 (@modelcontextprotocol/server), with one tool: `echo {text}`.
//   --modern-only  refuse a 2025-era opening (initialize) with the
//                  unsupported-protocol-version error, so only a client
//                  that speaks 2026-07-28 gets anywhere
import { McpServer, fromJsonSchema } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

const factory = () => {
  const server = new McpServer({ name: 'modern-peer', version: '1.0.0' });
  server.registerTool(
    'echo',
    {
      description: 'Echoes the text back',
      inputSchema: fromJsonSchema({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }),
    },
    async ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }),
  );
  return server;
};

serveStdio(factory, { legacy: process.argv.includes('--modern-only') ? 'reject' : 'serve' });
