// Prints golden vectors from Kafka's own classes for tests/security (one JSON object a line):
// the ACL and SCRAM codes, the api keys of the security metadata records, SCRAM credentials and
// a whole SCRAM exchange from ScramFormatter, and StandardAuthorizer's decisions (authorize and
// authorizeByResourceType) over fixed and seeded random ACL sets, AclBindingFilter's matches, the
// subjects of certificates as Java prints them and SslPrincipalMapper's names. Regenerate (Kafka 4.4.0's jars, from bench/kafka/kafka.sh):
//   L=~/.cache/replog-bench/kafka-4.4.0/libs
//   javac -cp "$L/*" -d /tmp/secgold tests/security/gold/KafkaSecurityGold.java
//   java -cp "/tmp/secgold:$L/*" KafkaSecurityGold tests/security/gold/subjects.pem \
//     > tests/security/gold/kafka_security_gold.jsonl
// (subjects.pem: certificates with awkward subjects, for the distinguished-name vectors.)
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.metadata.AccessControlEntryRecord;
import org.apache.kafka.common.metadata.RemoveAccessControlEntryRecord;
import org.apache.kafka.common.metadata.RemoveUserScramCredentialRecord;
import org.apache.kafka.common.metadata.UserScramCredentialRecord;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.security.scram.internals.ScramFormatter;
import org.apache.kafka.common.security.scram.internals.ScramMechanism;
import org.apache.kafka.common.security.scram.internals.ScramMessages;
import org.apache.kafka.metadata.authorizer.StandardAcl;
import org.apache.kafka.metadata.authorizer.StandardAuthorizer;
import org.apache.kafka.server.authorizer.Action;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.authorizer.AuthorizationResult;

import org.apache.kafka.common.security.ssl.SslPrincipalMapper;

import java.io.FileInputStream;
import java.net.InetAddress;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class KafkaSecurityGold {
    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }

    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static AuthorizableRequestContext context(String principal, String host) throws Exception {
        int colon = principal.indexOf(':');
        KafkaPrincipal p = new KafkaPrincipal(principal.substring(0, colon), principal.substring(colon + 1));
        InetAddress address = InetAddress.getByName(host);
        return new AuthorizableRequestContext() {
            public String listenerName() { return "PLAINTEXT"; }
            public SecurityProtocol securityProtocol() { return SecurityProtocol.PLAINTEXT; }
            public KafkaPrincipal principal() { return p; }
            public InetAddress clientAddress() { return address; }
            public int requestType() { return 0; }
            public int requestVersion() { return 0; }
            public String clientId() { return "gold"; }
            public int correlationId() { return 1; }
        };
    }

    static final ResourceType[] TYPES = {ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID};
    static final String[] NAMES = {"orders", "orders-eu", "ord", "o", "payments", "*", "*x", "kafka-cluster", "tx-1", "t"};
    static final String[] PRINCIPALS = {"User:alice", "User:bob", "User:*", "User:CN=app,OU=x", "Group:ops"};
    static final String[] CALLERS = {"User:alice", "User:bob", "User:CN=app,OU=x", "Group:ops", "User:ANONYMOUS", "User:admin"};
    static final String[] HOSTS = {"127.0.0.1", "10.0.0.7"};
    static final AclOperation[] OPS = {
        AclOperation.ALL, AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE};

    // A query is {caller index, host index, operation code, resource type code, name index}.
    static void decisions(String label, List<StandardAcl> acls, boolean allowEveryone,
                          List<int[]> queries, boolean printQueries) throws Exception {
        StandardAuthorizer authorizer = new StandardAuthorizer();
        Map<String, Object> configs = new HashMap<>();
        configs.put("super.users", "User:admin");
        configs.put("allow.everyone.if.no.acl.found", Boolean.toString(allowEveryone));
        authorizer.configure(configs);
        // The broker gives its plugins their metrics; authorize() records into them.
        authorizer.withPluginMetrics(new org.apache.kafka.common.metrics.internals.PluginMetricsImpl(
            new org.apache.kafka.common.metrics.Metrics(), Map.of()));
        Map<Uuid, StandardAcl> byId = new LinkedHashMap<>();
        StringBuilder aclJson = new StringBuilder("[");
        int i = 0;
        for (StandardAcl acl : acls) {
            byId.put(new Uuid(0L, ++i), acl);
            if (aclJson.length() > 1) aclJson.append(',');
            aclJson.append('[').append(acl.resourceType().code()).append(',').append(q(acl.resourceName()))
                .append(',').append(acl.patternType().code()).append(',').append(q(acl.principal()))
                .append(',').append(q(acl.host())).append(',').append(acl.operation().code())
                .append(',').append(acl.permissionType().code()).append(']');
        }
        aclJson.append(']');
        authorizer.loadSnapshot(byId);
        authorizer.completeInitialLoad();
        StringBuilder results = new StringBuilder();
        StringBuilder asked = new StringBuilder("[");
        for (int[] query : queries) {
            ResourceType type = ResourceType.fromCode((byte) query[3]);
            AclOperation op = AclOperation.fromCode((byte) query[2]);
            Action action = new Action(op, new ResourcePattern(type, NAMES[query[4]], PatternType.LITERAL), 1, true, true);
            AuthorizationResult result = authorizer.authorize(context(CALLERS[query[0]], HOSTS[query[1]]), List.of(action)).get(0);
            results.append(result == AuthorizationResult.ALLOWED ? '1' : '0');
            if (asked.length() > 1) asked.append(',');
            asked.append(Arrays.toString(query).replace(" ", ""));
        }
        asked.append(']');
        // authorizeByResourceType: every (caller, host, operation, type), in this loop order.
        StringBuilder byType = new StringBuilder();
        for (int caller = 0; caller < CALLERS.length; caller++)
            for (int host = 0; host < HOSTS.length; host++)
                for (AclOperation op : Arrays.copyOfRange(OPS, 1, OPS.length))
                    for (ResourceType type : TYPES)
                        byType.append(authorizer.authorizeByResourceType(context(CALLERS[caller], HOSTS[host]), op, type)
                            == AuthorizationResult.ALLOWED ? '1' : '0');
        System.out.println("{\"kind\":\"authorizer\",\"label\":" + q(label) + ",\"allow_everyone\":" + allowEveryone
            + ",\"super_users\":\"User:admin\",\"acls\":" + aclJson
            + (printQueries ? ",\"queries\":" + asked : "") + ",\"allowed\":\"" + results + "\""
            + ",\"by_type_allowed\":\"" + byType + "\"}");
    }

    // AclBindingFilter.matches: 300 seeded random filters, each over every ACL of the runs above
    // (the ACLs are the "acls" of the authorizer lines, fixed first, in order).
    static void filters(Random random, List<StandardAcl> acls) {
        ResourceType[] types = {ResourceType.ANY, ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID};
        PatternType[] patterns = {PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED};
        String[] hosts = {null, "*", "127.0.0.1", "10.0.0.7"};
        AclPermissionType[] permissions = {AclPermissionType.ANY, AclPermissionType.ALLOW, AclPermissionType.DENY};
        for (int n = 0; n < 300; n++) {
            String name = random.nextInt(4) == 0 ? null : NAMES[random.nextInt(NAMES.length)];
            String principal = random.nextInt(3) == 0 ? null : PRINCIPALS[random.nextInt(PRINCIPALS.length)];
            AclOperation op = random.nextInt(3) == 0 ? AclOperation.ANY : OPS[random.nextInt(OPS.length)];
            AclBindingFilter filter = new AclBindingFilter(
                new ResourcePatternFilter(types[random.nextInt(types.length)], name, patterns[random.nextInt(patterns.length)]),
                new AccessControlEntryFilter(principal, hosts[random.nextInt(hosts.length)], op, permissions[random.nextInt(permissions.length)]));
            StringBuilder matched = new StringBuilder();
            for (StandardAcl acl : acls) matched.append(filter.matches(acl.toBinding()) ? '1' : '0');
            System.out.println("{\"kind\":\"filter\",\"resource_type\":" + filter.patternFilter().resourceType().code()
                + ",\"name\":" + (name == null ? "null" : q(name)) + ",\"pattern_type\":" + filter.patternFilter().patternType().code()
                + ",\"principal\":" + (principal == null ? "null" : q(principal))
                + ",\"host\":" + (filter.entryFilter().host() == null ? "null" : q(filter.entryFilter().host()))
                + ",\"operation\":" + op.code() + ",\"permission_type\":" + filter.entryFilter().permissionType().code()
                + ",\"matches\":\"" + matched + "\"}");
        }
    }

    static List<int[]> randomQueries(Random random, int count) {
        List<int[]> queries = new ArrayList<>();
        for (int n = 0; n < count; n++) {
            queries.add(new int[]{
                random.nextInt(CALLERS.length), random.nextInt(HOSTS.length),
                OPS[1 + random.nextInt(OPS.length - 1)].code(),
                TYPES[random.nextInt(TYPES.length)].code(), random.nextInt(NAMES.length)});
        }
        return queries;
    }

    static final String[] RULES = {
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
        "RULE:^CN=([^,]*).*$/$1/L",
        "RULE:^CN=([^,]*),.*O=([^,]*).*$/$2-$1/U, DEFAULT",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.-]*).*$/$1@$3/",
        "RULE:^CN=(multi)\\+OU=(.*?),.*$/$2:$1/",
        "RULE:^(.*)$/[$1]/",
        "RULE:^CN=app.*$/app/",
    };
    static final String[] EXTRA_SUBJECTS = {
        "CN=kafka1,OU=ServiceUsers,O=Org,C=US",
        "CN=Duke,OU=JavaSoft,O=Sun Microsystems,C=US",
        "OU=nobody",
    };

    // Each certificate of subjects.pem (made by the cryptography package): its subject as Java
    // prints it; then every subject under every rule set (the mapped name, or null for none).
    static void subjects(String pemFile) throws Exception {
        List<String> names = new ArrayList<>();
        try (FileInputStream in = new FileInputStream(pemFile)) {
            for (Object c : CertificateFactory.getInstance("X.509").generateCertificates(in))
                names.add(((X509Certificate) c).getSubjectX500Principal().getName());
        }
        System.out.println("{\"kind\":\"subjects\",\"names\":[" + String.join(",", names.stream().map(KafkaSecurityGold::q).toList()) + "]}");
        names.addAll(Arrays.asList(EXTRA_SUBJECTS));
        for (String rules : RULES) {
            SslPrincipalMapper mapper = SslPrincipalMapper.fromRules(rules);
            StringBuilder mapped = new StringBuilder();
            for (String name : names) {
                if (mapped.length() > 0) mapped.append(',');
                String result;
                try {
                    result = q(mapper.getName(name));
                } catch (SslPrincipalMapper.NoMatchingRule e) {
                    result = "null";
                }
                mapped.append("[").append(q(name)).append(",").append(result).append("]");
            }
            System.out.println("{\"kind\":\"mapping\",\"rules\":" + q(rules) + ",\"mapped\":[" + mapped + "]}");
        }
    }

    public static void main(String[] args) throws Exception {
        subjects(args.length > 0 ? args[0] : "tests/security/gold/subjects.pem");
        StringBuilder codes = new StringBuilder("{\"kind\":\"codes\"");
        for (ResourceType t : ResourceType.values()) codes.append(",\"resource_type.").append(t.name()).append("\":").append(t.code());
        for (PatternType t : PatternType.values()) codes.append(",\"pattern_type.").append(t.name()).append("\":").append(t.code());
        for (AclOperation t : AclOperation.values()) codes.append(",\"operation.").append(t.name()).append("\":").append(t.code());
        for (AclPermissionType t : AclPermissionType.values()) codes.append(",\"permission_type.").append(t.name()).append("\":").append(t.code());
        for (org.apache.kafka.clients.admin.ScramMechanism m : org.apache.kafka.clients.admin.ScramMechanism.values())
            codes.append(",\"scram_mechanism.").append(m.mechanismName()).append("\":").append(m.type());
        for (ScramMechanism m : ScramMechanism.values())
            codes.append(",\"min_iterations.").append(m.mechanismName()).append("\":").append(m.minIterations());
        codes.append(",\"api_key.AccessControlEntryRecord\":").append(new AccessControlEntryRecord().apiKey());
        codes.append(",\"api_key.RemoveAccessControlEntryRecord\":").append(new RemoveAccessControlEntryRecord().apiKey());
        codes.append(",\"api_key.UserScramCredentialRecord\":").append(new UserScramCredentialRecord().apiKey());
        codes.append(",\"api_key.RemoveUserScramCredentialRecord\":").append(new RemoveUserScramCredentialRecord().apiKey());
        System.out.println(codes.append('}'));

        byte[] salt = "replog-salt-0001".getBytes(StandardCharsets.UTF_8);
        for (ScramMechanism m : ScramMechanism.values()) {
            ScramFormatter f = new ScramFormatter(m);
            for (String password : new String[]{"pencil", "pässwörd,=x"}) {
                for (int iterations : new int[]{4096, 8192}) {
                    byte[] salted = f.saltedPassword(password, salt, iterations);
                    byte[] storedKey = f.hash(f.clientKey(salted));
                    byte[] serverKey = f.serverKey(salted);
                    System.out.println("{\"kind\":\"credential\",\"mechanism\":" + q(m.mechanismName()) + ",\"password\":" + q(password)
                        + ",\"salt\":\"" + hex(salt) + "\",\"iterations\":" + iterations + ",\"salted_password\":\"" + hex(salted)
                        + "\",\"stored_key\":\"" + hex(storedKey) + "\",\"server_key\":\"" + hex(serverKey) + "\"}");
                }
            }
            // One exchange with fixed nonces: the client's messages and the server's, as Kafka writes them.
            String user = "al,ice=";
            String password = "pencil";
            String clientNonce = "fyko+d2lbbFgONRv9qkxdawL";
            String serverNonce = "3rfcNHYJY1ZVvWVs7j";
            byte[] salted = f.saltedPassword(password, salt, 4096);
            ScramMessages.ClientFirstMessage first = new ScramMessages.ClientFirstMessage(ScramFormatter.saslName(user), clientNonce, Map.of());
            ScramMessages.ServerFirstMessage serverFirst = new ScramMessages.ServerFirstMessage(clientNonce, serverNonce, salt, 4096);
            ScramMessages.ClientFinalMessage finalMessage = new ScramMessages.ClientFinalMessage("n,,".getBytes(StandardCharsets.UTF_8), serverFirst.nonce());
            finalMessage.proof(f.clientProof(salted, first, serverFirst, finalMessage));
            byte[] serverSignature = f.serverSignature(f.serverKey(salted), first, serverFirst, finalMessage);
            ScramMessages.ServerFinalMessage serverFinal = new ScramMessages.ServerFinalMessage(null, serverSignature);
            System.out.println("{\"kind\":\"exchange\",\"mechanism\":" + q(m.mechanismName()) + ",\"user\":" + q(user)
                + ",\"password\":" + q(password) + ",\"salt\":\"" + hex(salt) + "\",\"client_nonce\":" + q(clientNonce)
                + ",\"server_nonce\":" + q(serverNonce)
                + ",\"client_first\":" + q(new String(first.toBytes(), StandardCharsets.UTF_8))
                + ",\"server_first\":" + q(new String(serverFirst.toBytes(), StandardCharsets.UTF_8))
                + ",\"client_final\":" + q(new String(finalMessage.toBytes(), StandardCharsets.UTF_8))
                + ",\"server_final\":" + q(new String(serverFinal.toBytes(), StandardCharsets.UTF_8)) + "}");
        }

        List<StandardAcl> fixed = List.of(
            new StandardAcl(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            new StandardAcl(ResourceType.TOPIC, "orders", PatternType.PREFIXED, "User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
            new StandardAcl(ResourceType.TOPIC, "orders-eu", PatternType.LITERAL, "User:bob", "10.0.0.7", AclOperation.WRITE, AclPermissionType.DENY),
            new StandardAcl(ResourceType.TOPIC, "*", PatternType.LITERAL, "User:*", "*", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW),
            new StandardAcl(ResourceType.TOPIC, "pay", PatternType.PREFIXED, "User:*", "*", AclOperation.ALL, AclPermissionType.DENY),
            new StandardAcl(ResourceType.GROUP, "*", PatternType.LITERAL, "User:alice", "127.0.0.1", AclOperation.READ, AclPermissionType.ALLOW),
            new StandardAcl(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:CN=app,OU=x", "*", AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW),
            new StandardAcl(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.PREFIXED, "Group:ops", "*", AclOperation.ALL, AclPermissionType.ALLOW),
            new StandardAcl(ResourceType.TRANSACTIONAL_ID, "tx-1", PatternType.LITERAL, "User:*", "*", AclOperation.DESCRIBE, AclPermissionType.DENY),
            new StandardAcl(ResourceType.TOPIC, "*x", PatternType.PREFIXED, "User:alice", "*", AclOperation.CREATE, AclPermissionType.ALLOW));
        // Every query, in this order of loops (the test enumerates the same).
        List<int[]> every = new ArrayList<>();
        for (int caller = 0; caller < CALLERS.length; caller++)
            for (int host = 0; host < HOSTS.length; host++)
                for (AclOperation op : Arrays.copyOfRange(OPS, 1, OPS.length))
                    for (ResourceType type : TYPES)
                        for (int name = 0; name < NAMES.length; name++)
                            every.add(new int[]{caller, host, op.code(), type.code(), name});
        System.out.println("{\"kind\":\"tables\",\"callers\":[" + String.join(",", Arrays.stream(CALLERS).map(KafkaSecurityGold::q).toList())
            + "],\"hosts\":[" + String.join(",", Arrays.stream(HOSTS).map(KafkaSecurityGold::q).toList())
            + "],\"names\":[" + String.join(",", Arrays.stream(NAMES).map(KafkaSecurityGold::q).toList())
            + "],\"operations\":" + Arrays.toString(Arrays.stream(OPS).skip(1).mapToInt(AclOperation::code).toArray()).replace(" ", "")
            + ",\"resource_types\":" + Arrays.toString(Arrays.stream(TYPES).mapToInt(ResourceType::code).toArray()).replace(" ", "") + "}");
        decisions("fixed", fixed, false, every, false);
        decisions("fixed", fixed, true, every, false);

        Random random = new Random(81);
        List<StandardAcl> everyAcl = new ArrayList<>(fixed);
        PatternType[] patterns = {PatternType.LITERAL, PatternType.PREFIXED};
        AclPermissionType[] permissions = {AclPermissionType.ALLOW, AclPermissionType.DENY};
        String[] aclHosts = {"*", "127.0.0.1", "10.0.0.7"};
        for (int set = 0; set < 40; set++) {
            Set<StandardAcl> acls = new LinkedHashSet<>();
            int size = random.nextInt(9);
            for (int n = 0; n < size; n++) {
                acls.add(new StandardAcl(TYPES[random.nextInt(TYPES.length)], NAMES[random.nextInt(NAMES.length)],
                    patterns[random.nextInt(2)], PRINCIPALS[random.nextInt(PRINCIPALS.length)],
                    aclHosts[random.nextInt(aclHosts.length)], OPS[random.nextInt(OPS.length)],
                    permissions[random.nextInt(2)]));
            }
            decisions("random-" + set, new ArrayList<>(acls), set % 2 == 1, randomQueries(random, 150), true);
            everyAcl.addAll(acls);
        }
        filters(new Random(82), everyAcl);
    }
}
