// HTTP steps of scripts/ci/container-test.sh, against a gateway running in a container.
// Node's own fetch only: it runs before and without the project's dependencies.
//   node container-drive.mjs ready <url> <seconds>        poll until <url> answers 200
//   node container-drive.mjs cpfs <gateway> <prefix>      the three sandbox CPFs, end to end
//   node container-drive.mjs longpoll <gateway> <id>      submit, then hold a long-poll open;
//                                                          prints what ended it (JSON)
//   node container-drive.mjs waiters <gateway> <n> <s>    poll /metrics until n long-polls are held
// Never prints a CPF: only the scenario's name.

const [command, ...args] = process.argv.slice(2);

/** The sandbox's default scenario CPFs (docs/sandbox.md) and the decision each must give. */
const SCENARIOS = [
  { name: 'cost-saving reject', cpf: '31415926590', costSavingEnabled: true, decision: 'filtered' },
  { name: 'standard reject', cpf: '27182818205', costSavingEnabled: false, decision: 'declined' },
  { name: 'approve', cpf: '16180339805', costSavingEnabled: false, decision: 'approved', srd: { grossIncome: 8000, desiredCreditLimit: 5000 } },
];

function fail(message) {
  process.stderr.write(`container-drive: ${message}\n`);
  process.exit(1);
}

async function poll(what, seconds, attempt) {
  const deadline = Date.now() + seconds * 1000;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    try {
      const outcome = await attempt();
      if (outcome === true) return;
      last = outcome;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  fail(`${what}: not within ${seconds} s (last: ${last})`);
}

async function submit(gateway, body) {
  const response = await fetch(`${gateway}/v1/underwritings`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const answer = await response.json();
  if (response.status !== 202 || answer.status !== 'submitted') fail(`submit ${body.customerUuid}: ${response.status} ${JSON.stringify(answer)}`);
}

if (command === 'ready') {
  const [url, seconds] = args;
  await poll(`${url} answering 200`, Number(seconds), async () => {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return response.status === 200 ? true : `status ${response.status}`;
  });
} else if (command === 'cpfs') {
  const [gateway, prefix] = args;
  const started = Date.now();
  await Promise.all(
    SCENARIOS.map(async (scenario, i) => {
      const customerUuid = `${prefix}-${i}`;
      await submit(gateway, { customerUuid, cpf: scenario.cpf, costSavingEnabled: scenario.costSavingEnabled, ...(scenario.srd ? { srd: scenario.srd } : {}) });
      let stored;
      await poll(`${scenario.name}: completed`, 60, async () => {
        const response = await fetch(`${gateway}/v1/underwritings/${customerUuid}?wait=30`, { signal: AbortSignal.timeout(35_000) });
        stored = await response.json();
        return response.status === 200 && stored.status === 'completed' ? true : `${response.status} ${stored.status ?? stored.error}`;
      });
      if (stored.decision !== scenario.decision) fail(`${scenario.name}: decision ${stored.decision}, expected ${scenario.decision}`);
      if (stored.result?.customerUuid !== customerUuid) fail(`${scenario.name}: the stored result is not this customer's`);
      if (JSON.stringify(stored).includes(scenario.cpf)) fail(`${scenario.name}: the full CPF came back`);
      process.stdout.write(`  ${scenario.name}: ${stored.decision} (cpfMasked ${stored.cpfMasked})\n`);
    }),
  );
  process.stdout.write(`  three sandbox CPFs end to end in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
} else if (command === 'longpoll') {
  const [gateway, customerUuid] = args;
  await submit(gateway, { customerUuid, cpf: '11144477735', costSavingEnabled: false });
  const started = Date.now();
  let outcome;
  try {
    const response = await fetch(`${gateway}/v1/underwritings/${customerUuid}?wait=30`, { signal: AbortSignal.timeout(40_000) });
    const body = await response.json().catch(() => null);
    outcome = { status: response.status, stored: body?.status ?? null };
  } catch (err) {
    outcome = { error: err instanceof Error ? (err.cause?.code ?? err.message) : String(err) };
  }
  process.stdout.write(`${JSON.stringify({ ...outcome, heldMs: Date.now() - started })}\n`);
} else if (command === 'waiters') {
  const [gateway, count, seconds] = args;
  await poll(`${count} long-poll(s) held`, Number(seconds), async () => {
    const text = await (await fetch(`${gateway}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
    const held = Number(/^underwriting_longpoll_waiters (\S+)$/m.exec(text)?.[1] ?? 0);
    return held >= Number(count) ? true : `${held} held`;
  });
} else {
  fail(`unknown command ${command ?? '(none)'}`);
}
