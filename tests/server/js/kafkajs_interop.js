// kafkajs against `kafkalog serve`: one scenario, driven by tests/server/test_more_clients.py.
//
// Usage: node kafkajs_interop.js <bootstrap> <topic> <group>
// Prints one JSON object on stdout: the records consumed back (base64 keys, values and headers), the
// offsets a second consumer of the group resumed from, and what read_committed saw of two transactions.
'use strict';

const { Kafka, CompressionTypes, logLevel } = require('kafkajs');

const [bootstrap, topic, group] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'kafkalog-kafkajs', brokers: [bootstrap], logLevel: logLevel.ERROR });

const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function record(partition, message) {
  const headers = Object.entries(message.headers || {}).map(([k, v]) => [k, b64(v)]);
  return { partition, offset: Number(message.offset), key: b64(message.key), value: b64(message.value), headers };
}

// Consume `expected` records with a group consumer (autoCommit off); commit after each batch when `commit`.
async function consumeGroup(groupId, expected, { commit, isolation }) {
  const consumer = kafka.consumer({
    groupId,
    readUncommitted: isolation !== 'read_committed',
    maxWaitTimeInMs: 100,
    sessionTimeout: 10000,
    rebalanceTimeout: 10000,
    heartbeatInterval: 500,
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      for (const message of batch.messages) {
        if (seen.length >= expected) break;
        seen.push(record(batch.partition, message));
        resolveOffset(message.offset);
        if (commit) {
          await consumer.commitOffsets([
            { topic: batch.topic, partition: batch.partition, offset: (BigInt(message.offset) + 1n).toString() },
          ]);
        }
      }
      await heartbeat();
      if (seen.length >= expected) done();
    },
  });
  const timeout = sleep(20000).then(() => 'timeout');
  const outcome = await Promise.race([finished.then(() => 'ok'), timeout]);
  await consumer.disconnect();
  if (outcome !== 'ok') throw new Error(`consumed ${seen.length} of ${expected} records in 20 s`);
  return seen;
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }] });
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
  await admin.disconnect();

  // plain produce: gzip batches with keys and headers (kafkajs ships gzip; others need plugins)
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const plain = [];
  for (let i = 0; i < 20; i++) {
    plain.push({
      key: i === 0 ? null : `k${i}`,
      value: `v${i}`,
      partition: i % 2,
      headers: { h: `x${i}`, bin: Buffer.from([0, 1, 2, i]) },
    });
  }
  await producer.send({ topic, compression: CompressionTypes.GZIP, messages: plain.slice(0, 10) });
  await producer.send({ topic, compression: CompressionTypes.None, messages: plain.slice(10) });
  await producer.disconnect();

  // consume back: the first consumer of the group commits after each record and stops at 12 records,
  // the second resumes from the committed offsets and reads the remaining 8
  const first = await consumeGroup(group, 12, { commit: true });
  const admin2 = kafka.admin();
  await admin2.connect();
  const committed = await admin2.fetchOffsets({ groupId: group, topics: [topic] });
  await admin2.disconnect();
  const second = await consumeGroup(group, 8, { commit: true });

  // transactions: one committed, one aborted; a read_committed group sees only the committed one
  const txProducer = kafka.producer({ transactionalId: `${topic}-tx`, idempotent: true, maxInFlightRequests: 1 });
  await txProducer.connect();
  let txn = await txProducer.transaction();
  await txn.send({ topic, compression: CompressionTypes.GZIP, messages: [
    { key: 'tk0', value: 'committed-0', partition: 0, headers: { t: 'c' } },
    { key: 'tk1', value: 'committed-1', partition: 1 },
  ] });
  await txn.commit();
  txn = await txProducer.transaction();
  await txn.send({ topic, messages: [
    { key: 'ak0', value: 'aborted-0', partition: 0 },
    { key: 'ak1', value: 'aborted-1', partition: 1 },
  ] });
  await txn.abort();
  // a last committed record after the aborted ones, so read_committed must skip them to reach it
  txn = await txProducer.transaction();
  await txn.send({ topic, messages: [{ key: 'tk2', value: 'committed-2', partition: 0 }] });
  await txn.commit();
  await txProducer.disconnect();
  const committedView = await consumeGroup(`${group}-rc`, 23, { commit: false, isolation: 'read_committed' });
  // read_uncommitted sees the aborted records too (20 + 5)
  const uncommittedView = await consumeGroup(`${group}-ru`, 25, { commit: false, isolation: 'read_uncommitted' });

  process.stdout.write(JSON.stringify({
    created,
    partitions: metadata.topics[0].partitions.length,
    first,
    committed: committed[0].partitions.map((p) => ({ partition: p.partition, offset: Number(p.offset) })),
    second,
    readCommitted: committedView,
    readUncommitted: uncommittedView,
  }) + '\n');
}

main().then(() => process.exit(0), (err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
