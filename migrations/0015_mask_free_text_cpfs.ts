import { type Kysely, sql } from 'kysely';

// Issue 32: CPFs typed into srd text fields were stored in clear, and copied into events' data.
// New requests are masked at the door (src/cpf.ts); this masks what was stored before, in place.
// The masking is copied here, not imported: a landed migration must not change when src does.
// Frozen once landed: change the schema with a new file.

const BATCH = 500;
/** Rows whose text holds 11 digits with at most two of `.`, `-`, space between neighbours. */
const CANDIDATE = '[0-9]([.\\- ]{0,2}[0-9]){10}';

function isValidCpf(digits: string): boolean {
  if (!/^[0-9]{11}$/.test(digits)) return false;
  const check = (length: number) => {
    let sum = 0;
    for (let i = 0; i < length; i++) sum += Number(digits[i]) * (length + 1 - i);
    return ((sum * 10) % 11) % 10;
  };
  return check(9) === Number(digits[9]) && check(10) === Number(digits[10]);
}

function maskCpfsInText(text: string): string {
  return text.replace(/[0-9](?:[.\- ]{0,2}[0-9])*/g, (run) => {
    const at: number[] = [];
    for (let i = 0; i < run.length; i++) if (run[i]! >= '0' && run[i]! <= '9') at.push(i);
    const digits = at.map((i) => run[i]).join('');
    const chars = run.split('');
    for (let start = 0; start + 11 <= digits.length; start++) {
      if (isValidCpf(digits.slice(start, start + 11))) for (let k = start; k < start + 11; k++) chars[at[k]!] = '*';
    }
    return chars.join('');
  });
}

type Srd = { address?: Record<string, unknown> } | null;

/** srd with its address's text fields masked; undefined when nothing changed. */
function maskedSrd(srd: Srd): Srd | undefined {
  if (!srd?.address || typeof srd.address !== 'object') return undefined;
  let changed = false;
  const address: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(srd.address)) {
    const masked = typeof value === 'string' ? maskCpfsInText(value) : value;
    if (masked !== value) changed = true;
    address[field] = masked;
  }
  return changed ? { ...srd, address } : undefined;
}

export async function up(db: Kysely<unknown>): Promise<void> {
  for (let after = 0; ; ) {
    const { rows } = await sql<{ id: number; srd: Srd }>`
      select id, srd from underwriting_requests
      where id > ${after} and (srd -> 'address')::text ~ ${CANDIDATE} order by id limit ${BATCH}`.execute(db);
    for (const row of rows) {
      const srd = maskedSrd(row.srd);
      if (srd) await sql`update underwriting_requests set srd = ${JSON.stringify(srd)}::jsonb where id = ${row.id}`.execute(db);
    }
    if (rows.length < BATCH) break;
    after = Number(rows[rows.length - 1]!.id);
  }
  for (let after = 0; ; ) {
    const { rows } = await sql<{ id: number; data: { srd?: Srd } }>`
      select id, data from events
      where id > ${after} and (data -> 'srd' -> 'address')::text ~ ${CANDIDATE} order by id limit ${BATCH}`.execute(db);
    for (const row of rows) {
      const srd = maskedSrd(row.data.srd ?? null);
      if (srd) await sql`update events set data = ${JSON.stringify({ ...row.data, srd })}::jsonb where id = ${row.id}`.execute(db);
    }
    if (rows.length < BATCH) break;
    after = Number(rows[rows.length - 1]!.id);
  }
}

export async function down(): Promise<void> {
  // Masked digits cannot be restored; nothing to undo in the schema.
}
