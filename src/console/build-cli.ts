import { commandLine } from '../config/cli.js';
import { buildConsole } from './build.js';

// `npm run build` (and so `npm start`): bundle the console into dist/console.
const args = commandLine({
  command: 'node dist/src/console/build-cli.js',
  summary: 'Bundles the operations console (src/console/ui) into dist/console; npm run build runs it.',
});
if (args !== undefined) {
  void buildConsole()
    .then((files) => {
      const gzip = files.reduce((sum, f) => sum + f.gzipBytes, 0);
      process.stdout.write(`console: ${files.map((f) => `${f.name} ${f.bytes} B`).join(', ')}; ${gzip} B gzipped in all\n`);
    })
    .catch((err: unknown) => {
      process.stderr.write(`console build: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    });
}
