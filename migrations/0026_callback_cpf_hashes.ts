import { type Kysely, sql } from 'kysely';

// A callback's raw bytes were stored as received, so a CPF the provider put in them (a field of
// its own, an invalid callback's customerUuid, free text) was stored in clear, and erasure by CPF
// found it only in an invalid callback naming no customer, written exactly as 52998224725 or
// 529.982.247-25. Since this version the gateway masks every CPF in the bytes before they are
// stored (src/callbacks/kept-body.ts) and keeps the CPFs' keyed hashes here instead, for the
// callbacks that are not a request's result (invalid and unmatched ones): export and erasure by
// CPF find them by these. Null for a callback whose bytes held no CPF (nearly all), so the index
// holds only the few that did. Rows stored before keep their bytes; the pass in
// src/callbacks/body-mask-pass.ts masks them once a new instance starts.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table callbacks add column cpf_hashes text[]`.execute(db);
  await sql`create index callbacks_cpf_hashes on callbacks using gin (cpf_hashes) where cpf_hashes is not null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index callbacks_cpf_hashes`.execute(db);
  await sql`alter table callbacks drop column cpf_hashes`.execute(db);
}
