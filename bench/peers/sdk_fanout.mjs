// The baseline for `mcprt-bench connect_fanout`: the official TypeScript SDK
// client doing the same work against the same servers. Prints one JSON line.
//   node sdk_fanout.mjs N SERVER_COMMAND [ARGS...]
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The SDK is installed with the test peers (tests/peers/node_modules).
const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../tests/peers/package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const n = Number(process.argv[2] ?? 200);
const [command, ...args] = process.argv.slice(3);
if (!command) {
  console.error('usage: node sdk_fanout.mjs N SERVER_COMMAND [ARGS...]');
  process.exit(2);
}

function threads() {
  const m = readFileSync('/proc/self/status', 'utf8').match(/^Threads:\s+(\d+)/m);
  return m ? Number(m[1]) : 0;
}

const t0 = process.hrtime.bigint();
let peakThreads = threads();
const clients = await Promise.all(Array.from({ length: n }, async () => {
  const client = new Client({ name: 'sdk-fanout', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command, args, stderr: 'ignore' }));
  return client;
}));
peakThreads = Math.max(peakThreads, threads());
let tools = 0;
await Promise.all(clients.map(async (c) => {
  const list = await c.listTools();
  tools += list.tools.length;
  const r = await c.callTool({ name: 'echo', arguments: { text: 'fanout' } });
  if (!r.content || r.content[0].text !== 'fanout') throw new Error('bad echo result');
}));
peakThreads = Math.max(peakThreads, threads());
await Promise.all(clients.map((c) => c.close()));
const wall = Number(process.hrtime.bigint() - t0) / 1e9;
const cpu = process.cpuUsage();
console.log(JSON.stringify({
  n, tools,
  wall_s: wall,
  cpu_s: (cpu.user + cpu.system) / 1e6,
  rss_mb: process.resourceUsage().maxRSS / 1024,
  threads: peakThreads,
}));
