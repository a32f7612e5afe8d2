// Reads Debezium change events written as Avro as a Kafka Connect sink does: each record
// of partition 0 of the topic (read_committed, from the start to the end) goes through a
// registry-backed AvroConverter (Apicurio's, reading Confluent's wire format: the schema
// id in the value, looked up in the same registry through its own API), then Debezium's
// ExtractNewRecordState transform (deletes rewritten with `__deleted`, tombstones dropped,
// the envelope and source fields ADD_FIELDS names added as `__<field>`), and what comes
// out is written by Kafka Connect's JsonConverter, as a sink writing JSON would.
//
//     java -cp 'LIBS/*' ConnectDebeziumRead.java BOOTSTRAP TOPIC REGISTRY_CCOMPAT_URL ADD_FIELDS
//
// stdout gets one line per record: {"schema": the value schema's name, "value": the
// record's value}, or `null` for a record the transform dropped.

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.SinkRecord;

import io.apicurio.registry.utils.converter.AvroConverter;
import io.debezium.transforms.ExtractNewRecordState;

public class ConnectDebeziumRead {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String registry = args[2];
        String addFields = args[3];

        AvroConverter<Object> converter = new AvroConverter<>();
        Map<String, Object> converterConfig = new HashMap<>();
        // Apicurio's client speaks the registry's own API; Confluent's ids are its content ids.
        converterConfig.put("apicurio.registry.url", registry.replace("/apis/ccompat/v7", "/apis/registry/v2"));
        converterConfig.put("apicurio.registry.headers.enabled", "false");
        converterConfig.put("apicurio.registry.as-confluent", "true");
        converterConfig.put("apicurio.registry.use-id", "contentId");
        converter.configure(converterConfig, false);

        ExtractNewRecordState<SinkRecord> unwrap = new ExtractNewRecordState<>();
        unwrap.configure(Map.of("delete.tombstone.handling.mode", "rewrite", "add.fields", addFields));

        JsonConverter json = new JsonConverter();
        json.configure(Map.of("schemas.enable", "false"), false);

        Map<String, Object> consumerConfig = new HashMap<>();
        consumerConfig.put("bootstrap.servers", bootstrap);
        consumerConfig.put("isolation.level", "read_committed");
        consumerConfig.put("enable.auto.commit", "false");
        ByteArrayDeserializer bytes = new ByteArrayDeserializer();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerConfig, bytes, bytes)) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            while (consumer.position(partition) < end) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    SchemaAndValue value = converter.toConnectData(topic, record.value());
                    SinkRecord sink = new SinkRecord(topic, 0, null, null, value.schema(), value.value(), record.offset());
                    SinkRecord out = unwrap.apply(sink);
                    if (out == null) {
                        System.out.println("null");
                        continue;
                    }
                    String written = new String(json.fromConnectData(topic, out.valueSchema(), out.value()));
                    System.out.println("{\"schema\":\"" + out.valueSchema().name() + "\",\"value\":" + written + "}");
                }
            }
        }
    }
}
