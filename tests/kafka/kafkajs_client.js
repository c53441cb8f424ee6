// kafkajs against a replog Kafka listener, for tests/kafka/test_kafka_clients.py and
// tests/kafka/test_kafka_groups_node.py.
// node kafkajs_client.js <broker> produce <topic> <count>: an idempotent producer (acks=-1)
//   sends <count> records, keys k0..k2 in turn, values kafkajs-<i>; prints each record's offset.
// node kafkajs_client.js <broker> offsets <topic> <timestamp>: the admin client's earliest and
//   latest offsets and the offsets for <timestamp> (ListOffsets), as JSON.
// node kafkajs_client.js <broker> group <topic> <count>: two consumers of group "kafkajs"
//   (classic protocol, kafkajs' default round-robin assigner) subscribe to <topic>; once both
//   hold partitions and together hold every one, a producer sends <count> records
//   (kafkajs-<i>, to partition i % partitions); when every record is read, each consumer
//   commits past what it read and leaves. Prints, as JSON, each consumer's last assignment
//   and the (partition, offset, value) of each record it read.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [broker, mode, topic, arg] = process.argv.slice(2);
  const kafka = new Kafka({
    clientId: "replog-tests",
    brokers: [broker],
    logLevel: logLevel.ERROR,
    retry: { retries: 5 },
  });
  if (mode === "produce") {
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const offsets = [];
    for (let i = 0; i < Number(arg); i++) {
      const [sent] = await producer.send({
        topic,
        acks: -1,
        messages: [{ key: `k${i % 3}`, value: `kafkajs-${i}`, headers: { n: String(i) } }],
      });
      offsets.push(Number(sent.baseOffset));
    }
    await producer.disconnect();
    console.log(JSON.stringify({ offsets }));
  } else if (mode === "offsets") {
    const admin = kafka.admin();
    await admin.connect();
    const ends = await admin.fetchTopicOffsets(topic);
    const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, Number(arg));
    await admin.disconnect();
    console.log(JSON.stringify({ ends, byTime }));
  } else if (mode === "group") {
    console.log(JSON.stringify(await group(kafka, topic, Number(arg))));
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
}

async function group(kafka, topic, count) {
  const admin = kafka.admin();
  await admin.connect();
  const [{ partitions }] = (await admin.fetchTopicMetadata({ topics: [topic] })).topics;
  await admin.disconnect();
  const names = ["j1", "j2"];
  const owned = { j1: [], j2: [] };
  const read = { j1: [], j2: [] };
  const consumers = {};
  for (const name of names) {
    // Short heartbeats and fetch waits: a member learns of the second one's join at its next
    // heartbeat, which kafkajs sends between fetches.
    const consumer = kafka.consumer({
      groupId: "kafkajs",
      heartbeatInterval: 300,
      sessionTimeout: 6000,
      maxWaitTimeInMs: 100,
    });
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      owned[name] = payload.memberAssignment[topic] || [];
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        read[name].push([partition, Number(message.offset), message.value.toString()]);
      },
    });
    consumers[name] = consumer;
  }
  const until = async (what, done) => {
    const deadline = Date.now() + 30000;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  await until("the split", () => {
    const all = [...owned.j1, ...owned.j2];
    return owned.j1.length && owned.j2.length && new Set(all).size === partitions.length &&
      all.length === partitions.length;
  });
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic,
    acks: -1,
    messages: Array.from({ length: count }, (_, i) => ({
      value: `kafkajs-${i}`,
      partition: i % partitions.length,
    })),
  });
  await producer.disconnect();
  await until("every record", () => read.j1.length + read.j2.length >= count);
  for (const name of names) {
    const last = {};
    for (const [partition, offset] of read[name]) last[partition] = offset + 1;
    await consumers[name].commitOffsets(
      Object.entries(last).map(([partition, offset]) => ({
        topic,
        partition: Number(partition),
        offset: String(offset),
      }))
    );
  }
  for (const name of names) await consumers[name].disconnect();
  return { owned, read };
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
