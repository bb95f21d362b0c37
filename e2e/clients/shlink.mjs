// Drives linkraft with Shlink's own SDK (@shlinkio/shlink-js-sdk, the
// library the Shlink web client is built on), unchanged: writes through
// one node (WRITE_URL), reads through another (READ_URL). Run by
// e2e/compat_test.go; exits non-zero with the first broken expectation.
import assert from 'node:assert/strict';
import { ShlinkApiClient } from '@shlinkio/shlink-js-sdk';
import { NodeHttpClient } from '@shlinkio/shlink-js-sdk/node';

const { WRITE_URL, READ_URL, API_KEY, SLUG } = process.env;
const http = new NodeHttpClient();
const client = (baseUrl, apiKey = API_KEY) => new ShlinkApiClient(http, { baseUrl, apiKey });
const w = client(WRITE_URL);
const r = client(READ_URL);

// rejects runs call and returns the problem the SDK rejected it with.
async function rejects(call) {
  try {
    await call();
  } catch (problem) {
    return problem;
  }
  assert.fail('the call succeeded');
}

const health = await r.health();
assert.equal(health.status, 'pass');
assert.match(health.version, /^\d+\.\d+\.\d+$/);

const target = 'https://example.com/shlink-sdk';
const created = await w.createShortUrl({ longUrl: target, customSlug: SLUG, tags: ['e2e', 'sdk'], title: 'SDK', maxVisits: 100 });
assert.equal(created.shortCode, SLUG);
assert.equal(created.longUrl, target);
assert.equal(created.forwardQuery, true); // Shlink's default
assert.equal(created.meta.maxVisits, 100);
assert.deepEqual(created.visitsSummary, { total: 0, nonBots: 0, bots: 0 });
assert.ok(!Number.isNaN(Date.parse(created.dateCreated)));

// Read after write, on another node.
const read = await r.getShortUrl({ shortCode: SLUG });
assert.equal(read.longUrl, target);
assert.deepEqual([...read.tags].sort(), ['e2e', 'sdk']);

const moved = 'https://example.com/shlink-sdk-moved';
const edited = await w.updateShortUrl({ shortCode: SLUG }, { longUrl: moved, title: null, maxVisits: null });
assert.equal(edited.longUrl, moved);
assert.equal(edited.title, null);
assert.equal(edited.meta.maxVisits, null);
assert.equal((await r.getShortUrl({ shortCode: SLUG })).longUrl, moved);

const list = await r.listShortUrls({ tags: ['e2e', 'sdk'], tagsMode: 'all', itemsPerPage: 5, orderBy: { field: 'dateCreated', dir: 'DESC' } });
assert.ok(list.data.some((s) => s.shortCode === SLUG), 'the list has the link');
assert.equal(list.pagination.currentPage, 1);
assert.ok(list.pagination.totalItems >= 1);
assert.ok((await r.listTags()).data.includes('e2e'));
assert.ok((await r.tagsStats()).data.some((t) => t.tag === 'e2e' && t.shortUrlsCount >= 1));
assert.ok((await r.listDomains()).data.some((d) => d.isDefault));

// Errors reach the client as Shlink's problems.
const taken = await rejects(() => w.createShortUrl({ longUrl: target, customSlug: SLUG }));
assert.equal(taken.type, 'https://shlink.io/api/error/non-unique-slug');
assert.equal(taken.status, 400);
const missing = await rejects(() => r.getShortUrl({ shortCode: 'no-such-code' }));
assert.equal(missing.type, 'https://shlink.io/api/error/short-url-not-found');
assert.equal(missing.status, 404);
const badKey = await rejects(() => client(READ_URL, 'lk_not_a_key').listShortUrls());
assert.equal(badKey.type, 'https://shlink.io/api/error/invalid-api-key');
assert.equal(badKey.status, 401);
const mercure = await rejects(() => r.mercureInfo());
assert.equal(mercure.type, 'https://shlink.io/api/error/mercure-not-configured');
const visits = await r.getShortUrlVisits({ shortCode: SLUG });
assert.deepEqual(visits.data, []); // never visited (clients/shlink_visits.mjs reads rows)
const noTag = await rejects(() => r.getTagVisits('no-such-tag'));
assert.equal(noTag.type, 'https://shlink.io/api/error/tag-not-found');

// A second link stays for the test to check through linkraft's own API.
const kept = await w.createShortUrl({ longUrl: 'https://example.com/shlink-kept', customSlug: SLUG + '-kept' });
await w.deleteShortUrl({ shortCode: SLUG });
const deleted = await rejects(() => r.getShortUrl({ shortCode: SLUG }));
assert.equal(deleted.type, 'https://shlink.io/api/error/short-url-not-found');

console.log(JSON.stringify({ version: health.version, kept: kept.shortCode }));
