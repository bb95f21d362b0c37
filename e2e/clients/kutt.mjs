// Drives linkraft with Kutt's npm client (kutt), unchanged: writes through
// one node (WRITE_URL), reads through another (READ_URL). Run by
// e2e/compat_test.go; exits non-zero with the first broken expectation.
import assert from 'node:assert/strict';
import Kutt from 'kutt';

const { WRITE_URL, READ_URL, API_KEY, SLUG } = process.env;
const client = (base, key = API_KEY) => new Kutt().set('api', base + '/api/v2').set('key', key);
const w = client(WRITE_URL);
const r = client(READ_URL);

// rejects runs call and returns the error the client rejected it with.
async function rejects(call) {
  try {
    await call();
  } catch (err) {
    return err;
  }
  assert.fail('the call succeeded');
}

assert.equal(await r.health().check(), true);

const target = 'https://example.com/kutt-client';
const link = await w.links().create({ target, customurl: SLUG, description: 'K', expire_in: '2 hours', reuse: false });
assert.match(link.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
assert.equal(link.address, SLUG);
assert.equal(link.target, target);
assert.equal(link.description, 'K');
assert.equal(link.password, false);
assert.equal(link.banned, false);
assert.equal(link.visit_count, 0);
assert.ok(link.created_at instanceof Date && !Number.isNaN(link.created_at.getTime()));
assert.ok(link.expire_in);

// Read after write, on another node.
const list = await r.links().list({ limit: 50 });
assert.ok(list.total >= 1);
assert.ok(list.data.some((l) => l.id === link.id && l.target === target), 'the list has the link');

const moved = 'https://example.com/kutt-client-moved';
const updated = await w.links().update(link.id, { target: moved, description: 'K2' });
assert.equal(updated.target, moved);
assert.equal(updated.id, link.id);
assert.ok((await r.links().list({ limit: 50 })).data.some((l) => l.id === link.id && l.target === moved));

const stats = await r.links().stats(link.id); // sent as DELETE by the client
for (const [period, points] of [['lastDay', 24], ['lastWeek', 7], ['lastMonth', 30], ['lastYear', 12]]) {
  assert.equal(stats[period].views.length, points, period);
  assert.deepEqual(stats[period].stats.browser.map((b) => b.name).sort(), ['chrome', 'edge', 'firefox', 'ie', 'opera', 'other', 'safari'], period);
}
assert.ok(await r.users().info());

const taken = await rejects(() => w.links().create({ target, customurl: SLUG }));
assert.equal(taken.cause.status, 400);
assert.ok(taken.message.length > 0);
const badKey = await rejects(() => client(READ_URL, 'lk_not_a_key').links().list());
assert.equal(badKey.cause.status, 401);

const kept = await w.links().create({ target: 'https://example.com/kutt-kept', customurl: SLUG + '-kept' });
assert.match(await w.links().remove(link.id), /deleted/);
const gone = await rejects(() => r.links().stats(link.id));
assert.equal(gone.cause.status, 404);

console.log(JSON.stringify({ kept: kept.address, id: kept.id }));
