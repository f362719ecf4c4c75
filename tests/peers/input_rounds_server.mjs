// An MCP 2026-07-28 server over stdio, built with the official TypeScript
// SDK v2 (@modelcontextprotocol/server), that asks for input the 2026 way
// (input_required results; SEP-2322) exactly as the conformance suite
// 0.2.0-alpha.12 describes its reference server's tools and prompt:
//   test_input_required_result_elicitation     user_name (elicitation)
//   test_input_required_result_sampling        capital_question (sampling)
//   test_input_required_result_list_roots      client_roots (roots/list)
//   test_input_required_result_request_state   confirm, with requestState
//   test_input_required_result_tampered_state  confirm, with a signed requestState
//   test_input_required_result_multi_round     step1, then step2, new state each round
//   test_input_required_result_multiple_inputs user_name, greeting, client_roots at once
//   test_input_required_result_capabilities    only what the client declared
//   prompt test_input_required_result_prompt   user_context (elicitation)
// The suite run against mcprt's gateway in front of it (run-gateway.sh,
// MCPRT_GATEWAY_UPSTREAM=2026) checks that the gateway passes a 2026
// server's rounds through whole: its keys, several inputs at once, the
// client's own roots, and rounds of a prompts/get.
import { createHmac, randomBytes } from 'node:crypto';
import { McpServer, acceptedContent, fromJsonSchema, inputRequired } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

const key = randomBytes(32);
const sign = (text) => `${text}.${createHmac('sha256', key).update(text).digest('base64url')}`;
const verified = (state) => {
  if (typeof state !== 'string') return undefined;
  const dot = state.lastIndexOf('.');
  if (dot < 0) return undefined;
  const text = state.slice(0, dot);
  return sign(text) === state ? text : undefined;
};

const noArgs = fromJsonSchema({ type: 'object', properties: {} });
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const askName = (message) =>
  inputRequired.elicit({
    message,
    requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
  });
const askConfirm = () =>
  inputRequired.elicit({
    message: 'Please confirm',
    requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
  });
const askCapital = () =>
  inputRequired.createMessage({
    messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
    maxTokens: 100,
  });
const responses = (ctx) => ctx.mcpReq.inputResponses ?? {};
const has = (ctx, k) => responses(ctx)[k] !== undefined && responses(ctx)[k] !== null;
const capabilities = (ctx) => ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities'] ?? {};

const factory = () => {
  const server = new McpServer({ name: 'input-rounds-peer', version: '1.0.0' });
  const tool = (name, description, handler) => server.registerTool(name, { description, inputSchema: noArgs }, handler);

  tool('test_input_required_result_elicitation', 'Asks the user name', async (_args, ctx) => {
    if (!has(ctx, 'user_name')) return inputRequired({ inputRequests: { user_name: askName('What is your name?') } });
    const answer = acceptedContent(responses(ctx), 'user_name');
    return text(`Hello, ${typeof answer?.name === 'string' ? answer.name : 'stranger'}!`);
  });
  tool('test_input_required_result_sampling', 'Asks for a completion', async (_args, ctx) => {
    if (!has(ctx, 'capital_question')) return inputRequired({ inputRequests: { capital_question: askCapital() } });
    const answer = responses(ctx).capital_question;
    return text(`The model said: ${answer?.content?.text ?? '(no text)'}`);
  });
  tool('test_input_required_result_list_roots', "Asks for the client's roots", async (_args, ctx) => {
    if (!has(ctx, 'client_roots')) return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
    const roots = responses(ctx).client_roots?.roots ?? [];
    return text(`roots: ${roots.map((r) => r.uri).join(', ') || '(none)'}`);
  });
  tool('test_input_required_result_request_state', 'Asks for a confirmation, with state', async (_args, ctx) => {
    if (!has(ctx, 'confirm'))
      return inputRequired({ inputRequests: { confirm: askConfirm() }, requestState: sign('request-state') });
    if (verified(ctx.mcpReq.requestState()) !== 'request-state') throw new Error('requestState is not the one given');
    return text('state-ok');
  });
  tool('test_input_required_result_tampered_state', 'Asks for a confirmation, with signed state', async (_args, ctx) => {
    if (!has(ctx, 'confirm'))
      return inputRequired({ inputRequests: { confirm: askConfirm() }, requestState: sign('tampered-state') });
    if (verified(ctx.mcpReq.requestState()) !== 'tampered-state') throw new Error('requestState failed its integrity check');
    return text('state-ok');
  });
  tool('test_input_required_result_multi_round', 'Asks twice, a round each', async (_args, ctx) => {
    const state = verified(ctx.mcpReq.requestState());
    if (state === 'round-2' && has(ctx, 'step2')) return text('both steps answered');
    if (state === 'round-1' && has(ctx, 'step1'))
      return inputRequired({
        inputRequests: {
          step2: inputRequired.elicit({
            message: 'Step 2: What is your favorite color?',
            requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
          }),
        },
        requestState: sign('round-2'),
      });
    return inputRequired({
      inputRequests: { step1: askName('Step 1: What is your name?') },
      requestState: sign('round-1'),
    });
  });
  tool('test_input_required_result_multiple_inputs', 'Asks for three inputs at once', async (_args, ctx) => {
    if (verified(ctx.mcpReq.requestState()) === 'multiple' && ['user_name', 'greeting', 'client_roots'].every((k) => has(ctx, k)))
      return text('all three answered');
    return inputRequired({
      inputRequests: {
        user_name: askName('What is your name?'),
        greeting: inputRequired.createMessage({
          messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }],
          maxTokens: 50,
        }),
        client_roots: inputRequired.listRoots(),
      },
      requestState: sign('multiple'),
    });
  });
  tool('test_input_required_result_capabilities', 'Asks only for what the client declared', async (_args, ctx) => {
    const caps = capabilities(ctx);
    if (Object.keys(responses(ctx)).length > 0) return text('answered');
    const inputRequests = {};
    if (caps.sampling) inputRequests.capital_question = askCapital();
    if (caps.elicitation) inputRequests.user_name = askName('What is your name?');
    if (Object.keys(inputRequests).length === 0) return text('nothing to ask this client');
    return inputRequired({ inputRequests });
  });
  server.registerPrompt(
    'test_input_required_result_prompt',
    { description: 'A prompt that asks for its context first' },
    async (ctx) => {
      if (!has(ctx, 'user_context'))
        return inputRequired({
          inputRequests: {
            user_context: inputRequired.elicit({
              message: 'What context should the prompt use?',
              requestedSchema: { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] },
            }),
          },
        });
      const answer = acceptedContent(responses(ctx), 'user_context');
      const context = typeof answer?.context === 'string' ? answer.context : '(none)';
      return { messages: [{ role: 'user', content: { type: 'text', text: `Use this context: ${context}` } }] };
    },
  );
  return server;
};

serveStdio(factory, { legacy: 'serve' });
