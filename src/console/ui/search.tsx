import { useEffect, useState } from 'preact/hooks';
import { type Answer, lookupCpf, type Page, type RequestView } from './api.js';
import { Failure, RequestTable } from './parts.js';

type Kind = 'customerUuid' | 'cpf';

/** Find a customer by customerUuid (opens its view) or by CPF (through the lookup: the CPF goes in a POST body). */
/** Not refreshed with the page: each lookup by CPF is an audited act, done once per search. */
export function Search({ onOpen }: { onOpen: (customerUuid: string) => void }) {
  const [kind, setKind] = useState<Kind>('customerUuid');
  const [value, setValue] = useState('');
  // A new object per search, so searching the same CPF again reads again.
  const [cpf, setCpf] = useState<{ digits: string } | null>(null);
  const [found, setFound] = useState<Answer<Page<RequestView>> | null>(null);
  const [problem, setProblem] = useState<string | null>(null);

  useEffect(() => {
    if (!cpf) return;
    let current = true;
    void lookupCpf(cpf.digits).then((out) => current && setFound(out));
    return () => {
      current = false;
    };
  }, [cpf]);

  const submit = (e: Event) => {
    e.preventDefault();
    const v = value.trim();
    setProblem(null);
    if (kind === 'cpf') {
      const digits = v.replace(/[\s.\-/]/g, '');
      if (!/^\d{11}$/.test(digits)) return setProblem('A CPF has 11 digits.');
      setFound(null);
      setCpf({ digits });
      // The CPF is not kept on screen once sent.
      setValue('');
      return;
    }
    if (!/^[A-Za-z0-9_-]{1,128}$/.test(v)) return setProblem('A customerUuid has 1 to 128 letters, digits, - or _.');
    setCpf(null);
    setFound(null);
    onOpen(v);
  };

  return (
    <section class="panel">
      <h2>Find a customer</h2>
      <form class="search" onSubmit={submit}>
        <label>
          By{' '}
          <select
            name="kind"
            value={kind}
            onChange={(e) => setKind((e.currentTarget as HTMLSelectElement).value as Kind)}
          >
            <option value="customerUuid">customerUuid</option>
            <option value="cpf">CPF</option>
          </select>
        </label>{' '}
        <input
          name="q"
          aria-label={kind === 'cpf' ? 'CPF' : 'customerUuid'}
          placeholder={kind === 'cpf' ? '11 digits' : 'customerUuid'}
          autocomplete="off"
          spellcheck={false}
          value={value}
          onInput={(e) => setValue((e.currentTarget as HTMLInputElement).value)}
        />{' '}
        <button type="submit">Find</button>
        {problem && <span class="problem">{problem}</span>}
      </form>
      {found && !found.ok && <Failure answer={found} what="lookup" />}
      {found?.ok && (
        <div data-testid="lookup-results">
          <p class="muted">
            {found.data.items.length === 0
              ? 'No request for that CPF.'
              : `${found.data.items.length} request${found.data.items.length === 1 ? '' : 's'} for that CPF${found.data.nextCursor ? ' (the newest; more exist)' : ''}:`}
          </p>
          {found.data.items.length > 0 && <RequestTable requests={found.data.items} onOpen={onOpen} />}
        </div>
      )}
    </section>
  );
}
