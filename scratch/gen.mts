import openapiTS, { astToString } from 'openapi-typescript';
import { readFileSync } from 'node:fs';
console.log(astToString(await openapiTS(JSON.parse(readFileSync('/tmp/oa/after.json', 'utf8')))));
