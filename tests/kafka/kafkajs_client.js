// kafkajs against a replog Kafka listener, for tests/kafka/test_kafka_clients.py.
// node kafkajs_client.js <broker> produce <topic> <count>: an idempotent producer (acks=-1)
//   sends <count> records, keys k0..k2 in turn, values kafkajs-<i>; prints each record's offset.
// node kafkajs_client.js <broker> offsets <topic> <timestamp>: the admin client's earliest and
//   latest offsets and the offsets for <timestamp> (ListOffsets), as JSON.
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
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
