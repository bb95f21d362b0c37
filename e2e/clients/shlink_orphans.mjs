// Reads orphan visits (visits that found no link) with Shlink's own SDK
// (@shlinkio/shlink-js-sdk) through one node (READ_URL): every page, each
// kind apart, the default domain apart, and the overview's counts, which
// must equal what the Go test sent (EXPECTED, a JSON object of kind →
// visits; BOTS of them bots'). Then it deletes them through another node
// (WRITE_URL). Run by e2e/compat_test.go.
import assert from 'node:assert/strict';
import { ShlinkApiClient } from '@shlinkio/shlink-js-sdk';
import { NodeHttpClient } from '@shlinkio/shlink-js-sdk/node';

const { WRITE_URL, READ_URL, API_KEY, EXPECTED, BOTS, DEFAULT_DOMAIN_VISITS } = process.env;
const http = new NodeHttpClient();
const client = (baseUrl) => new ShlinkApiClient(http, { baseUrl, apiKey: API_KEY });
const r = client(READ_URL);
const w = client(WRITE_URL);
const expected = JSON.parse(EXPECTED);
const total = Object.values(expected).reduce((a, b) => a + b, 0);

// Every page, as the web client reads them: 5000 rows a page.
async function all(params) {
  const rows = [];
  for (let page = 1; page <= 100; page++) {
    const list = await r.getOrphanVisits({ ...params, page, itemsPerPage: 5000 });
    rows.push(...list.data);
    if (page >= list.pagination.pagesCount) {
      assert.equal(rows.length, list.pagination.totalItems);
      return rows;
    }
  }
  throw new Error('too many pages');
}

const rows = await all({});
const byType = {};
for (const v of rows) {
  assert.ok(!('ip' in v) && !('remoteAddr' in v), 'a row carries no address');
  assert.ok(!Number.isNaN(new Date(v.date).getTime()), `a row's date: ${v.date}`);
  byType[v.type] = (byType[v.type] ?? 0) + 1;
  if (v.type === 'base_url') {
    assert.match(v.visitedUrl, /^https?:\/\/[^/]+\/$/);
  }
}
assert.deepEqual(byType, expected);
assert.equal(rows.filter((v) => v.potentialBot).length, Number(BOTS));
for (const [type, n] of Object.entries(expected)) {
  const list = await r.getOrphanVisits({ type, itemsPerPage: 1 });
  assert.equal(list.pagination.totalItems, n, `${type} visits`);
  assert.ok(list.data.every((v) => v.type === type));
}
const people = await r.getOrphanVisits({ excludeBots: true, itemsPerPage: 1 });
assert.equal(people.pagination.totalItems, total - Number(BOTS));
const defaults = await r.getOrphanVisits({ domain: 'DEFAULT', itemsPerPage: 1 });
assert.equal(defaults.pagination.totalItems, Number(DEFAULT_DOMAIN_VISITS));

const overview = await r.getVisitsOverview();
assert.deepEqual(overview.orphanVisits, { total, nonBots: total - Number(BOTS), bots: Number(BOTS) });

const deleted = await w.deleteOrphanVisits();
assert.equal(deleted.deletedVisits, total);
const after = await r.getOrphanVisits();
assert.equal(after.pagination.totalItems, 0);
console.log(JSON.stringify({ rows: rows.length, deleted: deleted.deletedVisits }));
