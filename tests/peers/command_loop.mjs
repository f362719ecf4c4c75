// The stdin/stdout protocol of the gateway test clients: one JSON command
// per line in ({"op": OP, ...}), one JSON answer per line out ({"ok": OP,
// ...result} or {"error": OP, "message": ...}); "close" ends the process.
// And how a "connect" command names its transport.
import readline from 'node:readline';

export const print = (x) => process.stdout.write(JSON.stringify(x) + '\n');

/// The transport a "connect" command names: streamable HTTP ({url, token})
/// or a spawned stdio server ({command, args, cwd}), from either SDK's classes.
export function commandTransport(cmd, { StreamableHTTPClientTransport, StdioClientTransport }) {
  if (cmd.url) {
    const headers = cmd.token ? { Authorization: `Bearer ${cmd.token}` } : {};
    return new StreamableHTTPClientTransport(new URL(cmd.url), { requestInit: { headers } });
  }
  return new StdioClientTransport({ command: cmd.command, args: cmd.args ?? [], cwd: cmd.cwd, stderr: 'inherit' });
}

export async function serveCommands(run) {
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (!line.trim()) continue;
    let cmd;
    try {
      cmd = JSON.parse(line);
      print({ ok: cmd.op, ...(await run(cmd)) });
    } catch (e) {
      print({ error: cmd?.op ?? 'parse', message: String(e?.message ?? e) });
    }
    if (cmd?.op === 'close') process.exit(0);
  }
  process.exit(0);
}
