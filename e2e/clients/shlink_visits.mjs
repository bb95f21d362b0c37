// Reads a link's visits with Shlink's own SDK (@shlinkio/shlink-js-sdk)
// through one node (READ_URL), groups the rows by day, browser, OS,
// referrer and country as the Shlink web client draws its charts, and
// checks them against linkraft's own breakdowns (EXPECTED, a JSON object
// of dimension → value → clicks, read by the Go test from
// /api/v1/urls/{code}/stats?group_by=…). Then it deletes the visits
// through another node (WRITE_URL). Run by e2e/compat_test.go.
import assert from 'node:assert/strict';
import { ShlinkApiClient } from '@shlinkio/shlink-js-sdk';
import { NodeHttpClient } from '@shlinkio/shlink-js-sdk/node';

const { WRITE_URL, READ_URL, API_KEY, SLUG, EXPECTED, BOTS } = process.env;
const http = new NodeHttpClient();
const client = (baseUrl) => new ShlinkApiClient(http, { baseUrl, apiKey: API_KEY });
const r = client(READ_URL);
const w = client(WRITE_URL);
const expected = JSON.parse(EXPECTED);

// The web client names browsers and systems with bowser; these are its
// rules for the agents linkraft's rows carry (bowser is not one of the
// SDK's dependencies, so the test does not pin it), in linkraft's names.
function browserOf(ua) {
  if (/Edg\//.test(ua)) return 'edge';
  if (/OPR\//.test(ua)) return 'opera';
  if (/Firefox\//.test(ua)) return 'firefox';
  if (/Chrome\//.test(ua)) return 'chrome';
  if (/Version\/.*Safari\//.test(ua)) return 'safari';
  return 'other';
}
function osOf(ua) {
  if (/Windows NT/.test(ua)) return 'windows';
  if (/iPhone|iPad/.test(ua)) return 'ios';
  if (/Android/.test(ua)) return 'android';
  if (/CrOS/.test(ua)) return 'chromeos';
  if (/Mac OS X/.test(ua)) return 'macos';
  if (/Linux/.test(ua)) return 'linux';
  return 'other';
}
// extractDomain of the web client: the referer's host, "direct" without one.
function referrerOf(referer) {
  if (!referer) return 'direct';
  const host = referer.includes('://') ? referer.split('/')[2] : referer.split('/')[0];
  return host.split(':')[0];
}

// Every page, as the web client reads them: 5000 rows a page, bots left out.
const rows = [];
for (let page = 1; page <= 100; page++) {
  const list = await r.getShortUrlVisits({ shortCode: SLUG }, { page, itemsPerPage: 5000, excludeBots: true });
  rows.push(...list.data);
  if (page >= list.pagination.pagesCount) {
    assert.equal(rows.length, list.pagination.totalItems);
    break;
  }
}
const got = { day: {}, browser: {}, os: {}, referrer: {}, country: {} };
const count = (dim, key) => { got[dim][key] = (got[dim][key] ?? 0) + 1; };
for (const v of rows) {
  assert.equal(v.potentialBot, false);
  assert.ok(!('ip' in v) && !('remoteAddr' in v), 'a row carries no address');
  count('day', new Date(v.date).toISOString().slice(0, 10));
  count('browser', browserOf(v.userAgent));
  count('os', osOf(v.userAgent));
  count('referrer', referrerOf(v.referer));
  count('country', v.visitLocation?.countryCode ?? 'XX');
}
assert.deepEqual(got, expected);

// With bots: they are rows too, marked.
const all = await r.getShortUrlVisits({ shortCode: SLUG });
assert.equal(all.data.filter((v) => v.potentialBot).length, Number(BOTS));
const overview = await r.getVisitsOverview();
assert.ok(overview.nonOrphanVisits.total >= rows.length + Number(BOTS));
assert.equal(overview.orphanVisits.total, 0);

const deleted = await w.deleteShortUrlVisits({ shortCode: SLUG });
assert.equal(deleted.deletedVisits, rows.length + Number(BOTS));
const after = await r.getShortUrlVisits({ shortCode: SLUG });
assert.equal(after.pagination.totalItems, 0);
console.log(JSON.stringify({ rows: rows.length, deleted: deleted.deletedVisits }));
