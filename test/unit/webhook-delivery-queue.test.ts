import { DeliveryQueue, RECENT_KEYS } from '../../src/webhooks/legacy-in-state-queue';
import { MAX_ATTEMPTS, nextRetryAtMs, retryDelaysMs } from '../../src/webhooks/schedule';

/** The delivery workflow's queue and schedule, as pure data. */
it('waits 1 min, 5 min, 30 min, 2 h, 6 h, 24 h, 24 h between 8 attempts', () => {
  const minute = 60_000;
  expect(retryDelaysMs).toEqual([1, 5, 30, 120, 360, 1440, 1440].map((m) => m * minute));
  expect(MAX_ATTEMPTS).toBe(8);
  expect(nextRetryAtMs(1, 0)).toBe(minute);
  expect(nextRetryAtMs(7, 1000)).toBe(1000 + 1440 * minute);
  expect(nextRetryAtMs(8, 0)).toBeNull();
});

it('hands out deliveries in due order, each once', () => {
  const q = new DeliveryQueue();
  expect(q.add('evt_b', 0, 20)).toBe(true);
  expect(q.add('evt_a', 0, 10)).toBe(true);
  expect(q.takeDue(5)).toBeUndefined();
  expect(q.nextDueAtMs()).toBe(10);
  expect(q.takeDue(30)).toMatchObject({ eventId: 'evt_a', attemptNo: 1 });
  expect(q.takeDue(30)).toMatchObject({ eventId: 'evt_b' });
  expect(q.takeDue(30)).toBeUndefined();
  expect(q.inFlightCount).toBe(2);
});

it('ignores an event and generation already pending, in flight or recently finished', () => {
  const q = new DeliveryQueue();
  q.add('evt_1', 0, 0);
  expect(q.add('evt_1', 0, 0)).toBe(false);
  const d = q.takeDue(0)!;
  expect(q.add('evt_1', 0, 1)).toBe(false);
  q.finish(d);
  expect(q.add('evt_1', 0, 2)).toBe(false);
  expect(q.add('evt_1', 7, 2)).toBe(true); // a redelivery is a new generation
});

it('forgets finished keys beyond the recent window', () => {
  const q = new DeliveryQueue();
  for (let i = 0; i <= RECENT_KEYS; i++) {
    q.add(`evt_${i}`, 0, 0);
    q.finish(q.takeDue(0)!);
  }
  expect(q.add('evt_0', 0, 0)).toBe(true);
  expect(q.add(`evt_${RECENT_KEYS}`, 0, 0)).toBe(false);
});

it('requeues a failed attempt as the next attempt at its due time', () => {
  const q = new DeliveryQueue();
  q.add('evt_1', 0, 0);
  q.add('evt_2', 0, 100);
  q.retry(q.takeDue(0)!, 60_000);
  expect(q.takeDue(100)).toMatchObject({ eventId: 'evt_2' });
  expect(q.takeDue(59_999)).toBeUndefined();
  expect(q.takeDue(60_000)).toMatchObject({ eventId: 'evt_1', attemptNo: 2, dueAtMs: 60_000 });
});

it('puts back an attempt that could not be made, as the same attempt', () => {
  const q = new DeliveryQueue();
  q.add('evt_1', 0, 0);
  q.putBack(q.takeDue(0)!, 500);
  expect(q.inFlightCount).toBe(0);
  expect(q.takeDue(499)).toBeUndefined();
  expect(q.takeDue(500)).toMatchObject({ eventId: 'evt_1', attemptNo: 1, dueAtMs: 500 });
});

it('carries thousands of pending deliveries across a snapshot', () => {
  const q = new DeliveryQueue();
  for (let i = 0; i < 5000; i++) q.add(`evt_${i}`, 0, 5000 - i);
  q.finish(q.takeDue(1)!);
  const copy = new DeliveryQueue(JSON.parse(JSON.stringify(q.snapshot())));
  expect(copy.size).toBe(4999);
  expect(copy.add('evt_4999', 0, 0)).toBe(false);
  expect(copy.add('evt_10', 0, 0)).toBe(false);
  let last = -1;
  for (let d = copy.takeDue(1e9); d; d = copy.takeDue(1e9)) {
    expect(d.dueAtMs).toBeGreaterThanOrEqual(last);
    last = d.dueAtMs;
  }
});

it('drains every pending delivery for cancellation', () => {
  const q = new DeliveryQueue();
  q.add('evt_1', 0, 0);
  q.add('evt_2', 0, 10);
  const inFlight = q.takeDue(0)!;
  expect(q.drain().map((d) => d.eventId)).toEqual(['evt_2']);
  expect(q.size).toBe(0);
  expect(() => q.snapshot()).toThrow(/in flight/);
  q.finish(inFlight);
  expect(q.snapshot().pending).toEqual([]);
});
