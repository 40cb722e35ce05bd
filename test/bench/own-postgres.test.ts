import t from 'tap';
import { settingsFrom } from '../../bench/lib/own-postgres.js';

// BENCH_OWN_POSTGRES_SETTINGS: settings of the bench's private cluster, for diagnostic runs.

t.test('name=value words become settings; none gives none', (t) => {
  t.same(settingsFrom('full_page_writes=off  checkpoint_timeout=30min'), { full_page_writes: 'off', checkpoint_timeout: '30min' });
  t.same(settingsFrom('shared_preload_libraries=pg_stat_statements,auto_explain'), { shared_preload_libraries: 'pg_stat_statements,auto_explain' });
  t.same(settingsFrom(undefined), {});
  t.same(settingsFrom('  '), {});
  t.end();
});

t.test('a word that is not name=value is refused, not ignored', (t) => {
  t.throws(() => settingsFrom('full_page_writes'), /"full_page_writes" is not name=value/);
  t.throws(() => settingsFrom('=off'), /"=off" is not name=value/);
  t.end();
});
