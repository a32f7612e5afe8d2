// Reads Debezium change events as Flink SQL's `'format' = 'debezium-json'` does: each
// value goes through the DeserializationSchema that Flink's own DebeziumJsonDecodingFormat
// makes for a table with the given columns and every metadata column the format offers
// (`ingestion-timestamp`, `source.timestamp`, `source.database`, `source.schema`,
// `source.table`, `source.properties`), timestamps read as ISO-8601.
//
//     java -cp 'LIBS/*' FlinkDebeziumRead.java NAME:TYPE... < values
//
// TYPE is STRING, BIGINT, BOOLEAN, DOUBLE or TIMESTAMP_LTZ. stdin holds one record value
// a line (an empty line is a tombstone); stdout gets one line for each: a JSON array of
// the rows Flink emitted for it, each {"kind": "+I"|"-U"|"+U"|"-D", "row": {columns},
// and the metadata columns by key}, timestamps in milliseconds since the epoch. A value
// Flink refuses ends the run with its error.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.formats.common.TimestampFormat;
import org.apache.flink.formats.json.debezium.DebeziumJsonDecodingFormat;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.MapData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.types.DataType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.util.Collector;
import org.apache.flink.util.SimpleUserCodeClassLoader;
import org.apache.flink.util.UserCodeClassLoader;

public class FlinkDebeziumRead {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        List<String> names = new ArrayList<>();
        List<DataTypes.Field> fields = new ArrayList<>();
        for (String arg : args) {
            String[] parts = arg.split(":", 2);
            names.add(parts[0]);
            fields.add(DataTypes.FIELD(parts[0], type(parts[1])));
        }
        DataType physical = DataTypes.ROW(fields.toArray(new DataTypes.Field[0]));

        // As the table planner does for `'format' = 'debezium-json'` with
        // `'debezium-json.timestamp-format.standard' = 'ISO-8601'`.
        DebeziumJsonDecodingFormat format = new DebeziumJsonDecodingFormat(false, false, TimestampFormat.ISO_8601);
        List<String> metadata = new ArrayList<>(format.listReadableMetadata().keySet());
        // `schema` is only there when the events embed Kafka Connect's schema.
        metadata.remove("schema");
        format.applyReadableMetadata(metadata);
        DeserializationSchema<RowData> schema = format.createRuntimeDecoder(new PlannerContext(), physical);
        schema.open(new OpenContext());

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            ArrayNode emitted = JSON.createArrayNode();
            schema.deserialize(line.getBytes(StandardCharsets.UTF_8), new Collector<RowData>() {
                @Override
                public void collect(RowData row) {
                    emitted.add(render(row, names, fields, metadata));
                }

                @Override
                public void close() {
                }
            });
            System.out.println(JSON.writeValueAsString(emitted));
        }
    }

    private static DataType type(String name) {
        switch (name) {
            case "STRING":
                return DataTypes.STRING();
            case "BIGINT":
                return DataTypes.BIGINT();
            case "BOOLEAN":
                return DataTypes.BOOLEAN();
            case "DOUBLE":
                return DataTypes.DOUBLE();
            case "TIMESTAMP_LTZ":
                return DataTypes.TIMESTAMP_WITH_LOCAL_TIME_ZONE(3);
            default:
                throw new IllegalArgumentException("unknown column type " + name);
        }
    }

    private static ObjectNode render(RowData row, List<String> names, List<DataTypes.Field> fields, List<String> metadata) {
        ObjectNode out = JSON.createObjectNode();
        out.put("kind", row.getRowKind().shortString());
        ObjectNode columns = out.putObject("row");
        for (int i = 0; i < names.size(); i++) {
            LogicalType type = fields.get(i).getDataType().getLogicalType();
            if (row.isNullAt(i)) {
                columns.putNull(names.get(i));
            } else {
                switch (type.getTypeRoot()) {
                    case VARCHAR:
                        columns.put(names.get(i), row.getString(i).toString());
                        break;
                    case BIGINT:
                        columns.put(names.get(i), row.getLong(i));
                        break;
                    case BOOLEAN:
                        columns.put(names.get(i), row.getBoolean(i));
                        break;
                    case DOUBLE:
                        columns.put(names.get(i), row.getDouble(i));
                        break;
                    default:
                        // TIMESTAMP_LTZ(3): milliseconds since the epoch.
                        columns.put(names.get(i), row.getTimestamp(i, 3).getMillisecond());
                }
            }
        }
        for (int m = 0; m < metadata.size(); m++) {
            int pos = names.size() + m;
            String key = metadata.get(m);
            if (row.isNullAt(pos)) {
                out.putNull(key);
            } else if (key.endsWith("timestamp")) {
                // TIMESTAMP_LTZ(3): milliseconds since the epoch.
                out.put(key, row.getTimestamp(pos, 3).getMillisecond());
            } else if (key.equals("source.properties")) {
                MapData map = row.getMap(pos);
                ArrayData keys = map.keyArray();
                ArrayData values = map.valueArray();
                ObjectNode properties = out.putObject(key);
                for (int i = 0; i < map.size(); i++) {
                    if (values.isNullAt(i)) {
                        properties.putNull(keys.getString(i).toString());
                    } else {
                        properties.put(keys.getString(i).toString(), values.getString(i).toString());
                    }
                }
            } else {
                out.put(key, row.getString(pos).toString());
            }
        }
        return out;
    }

    /**
     * What the planner gives a format. The decoder only keeps the produced rows'
     * TypeInformation (the planner's InternalTypeInfo, from flink-table-runtime, which
     * this reader does without), so a generic one stands in.
     */
    private static final class PlannerContext implements DynamicTableSource.Context {
        @Override
        @SuppressWarnings("unchecked")
        public <T> TypeInformation<T> createTypeInformation(DataType type) {
            return (TypeInformation<T>) new GenericTypeInfo<>(RowData.class);
        }

        @Override
        @SuppressWarnings("unchecked")
        public <T> TypeInformation<T> createTypeInformation(LogicalType type) {
            return (TypeInformation<T>) new GenericTypeInfo<>(RowData.class);
        }

        @Override
        public DynamicTableSource.DataStructureConverter createDataStructureConverter(DataType type) {
            throw new UnsupportedOperationException("the format converts no data structures");
        }
    }

    /** What a Flink task gives a deserializer when it opens. */
    private static final class OpenContext implements DeserializationSchema.InitializationContext {
        @Override
        public MetricGroup getMetricGroup() {
            return new UnregisteredMetricsGroup();
        }

        @Override
        public UserCodeClassLoader getUserCodeClassLoader() {
            return SimpleUserCodeClassLoader.create(FlinkDebeziumRead.class.getClassLoader());
        }
    }
}
