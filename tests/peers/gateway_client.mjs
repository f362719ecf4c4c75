// A downstream MCP client for mcprt's gateway tests: the official TypeScript
// SDK's Client, driven by JSON commands on stdin, one per line; it answers
// each on stdout as one JSON line ({"ok": OP, ...} or {"error": OP, ...}) and
// prints what the gateway sends on its own ({"event": ...}) as it comes.
//
//   {"op": "connect", "url": URL, "token": T?}          streamable HTTP
//   {"op": "connect", "command": C, "args": [...]}      stdio (mcprt gateway)
//       "sampling": true, "elicitation": true, "roots": [{uri, name}]?
//       "samplingBarrier": N?  answer no sampling request before N have come
//                              (or 10 s have passed): proves N were out at once
//   {"op": "listTools"} {"op": "listPrompts"} {"op": "listResources"}
//   {"op": "callTool", "name": N, "arguments": {...}, "progress": true?}
//   {"op": "callTools", "calls": [{name, arguments}, ...]}  at once; results in order
//   {"op": "readResource", "uri": U} {"op": "getPrompt", "name": N, "arguments": {}}
//   {"op": "close"}                                     ends the session, exits
import { commandTransport, print, serveCommands } from './command_loop.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  ToolListChangedNotificationSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  LoggingMessageNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

let client;
let transport;

let sampled = 0;
const sampledWaiters = [];
function samplingBarrier(n) {
  sampled += 1;
  if (sampled >= n) sampledWaiters.splice(0).forEach((wake) => wake());
  if (sampled >= n) return Promise.resolve();
  return new Promise((wake) => {
    sampledWaiters.push(wake);
    setTimeout(wake, 10000);
  });
}

async function connect(cmd) {
  const capabilities = {};
  if (cmd.sampling) capabilities.sampling = {};
  if (cmd.elicitation) capabilities.elicitation = {};
  if (cmd.roots) capabilities.roots = { listChanged: true };
  client = new Client({ name: cmd.name ?? 'gateway-test-client', version: '1.2.3' }, { capabilities });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => print({ event: 'tools_list_changed' }));
  client.setNotificationHandler(PromptListChangedNotificationSchema, () => print({ event: 'prompts_list_changed' }));
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () =>
    print({ event: 'resources_list_changed' }));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => print({ event: 'log', params: n.params }));
  if (cmd.sampling)
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      print({ event: 'sampling', params: req.params });
      if (cmd.samplingBarrier) await samplingBarrier(cmd.samplingBarrier);
      return { role: 'assistant', content: { type: 'text', text: 'sampled by the sdk client' }, model: 'test-model' };
    });
  if (cmd.elicitation)
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      print({ event: 'elicitation', params: req.params });
      return { action: 'accept', content: cmd.elicitationContent ?? {} };
    });
  if (cmd.roots) client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: cmd.roots }));
  transport = commandTransport(cmd, { StreamableHTTPClientTransport, StdioClientTransport });
  await client.connect(transport);
  return { session: transport.sessionId ?? null, server: client.getServerVersion(), caps: client.getServerCapabilities() };
}

async function run(cmd) {
  switch (cmd.op) {
    case 'connect': return connect(cmd);
    case 'listTools': return { tools: (await client.listTools()).tools };
    case 'listPrompts': return { prompts: (await client.listPrompts()).prompts };
    case 'listResources': return { resources: (await client.listResources()).resources };
    case 'readResource': return await client.readResource({ uri: cmd.uri });
    case 'getPrompt': return await client.getPrompt({ name: cmd.name, arguments: cmd.arguments ?? {} });
    case 'callTool': {
      const opts = {};
      if (cmd.progress) opts.onprogress = (p) => print({ event: 'progress', params: p });
      return { result: await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} }, undefined, opts) };
    }
    case 'callTools': {
      const calls = cmd.calls.map((c) => client.callTool({ name: c.name, arguments: c.arguments ?? {} }));
      return { results: await Promise.all(calls) };
    }
    case 'close': {
      if (transport?.terminateSession) await transport.terminateSession();
      await client.close();
      return {};
    }
    default: throw new Error(`unknown op ${cmd.op}`);
  }
}

await serveCommands(run);
