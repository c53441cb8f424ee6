// Command jsbench is `replog bench`'s NATS JetStream driver: a compiled publisher and consumer,
// so that a run is limited by the JetStream servers and not by a Python client.
//
// It speaks the harness's driver-process protocol (replog/cli/bench/processes.py), the same as
// the Python driver processes: one JSON task on the first line of stdin; "ready" on stdout once
// connected; then "go START_NS" on stdin (start now; send times count from START_NS, the run's
// start in ns since the epoch); consumers print
// "n COUNT" (records received so far) a few times a second and stop at "stop" on stdin; at the
// end every role prints "result {JSON}" and exits 0. Samples (for each acknowledged or received
// record: seconds since the start when it was sent, latency in ms) go to the task's
// samples_path as little-endian float64 pairs.
//
// A Kafka partition maps to one JetStream stream (the unit JetStream replicates and elects a
// leader for) named "<topic>-p<N>", whose only subject is its name. Roles:
//   - create: make the task's streams (file storage, `replicas` copies) and wait for leaders.
//   - delete: delete the task's streams and every stream of the task's topics (those that
//     exist; a metadata run's admins made the latter, so the harness knows only the topics).
//   - leader: print the server name leading the first stream.
//   - produce: publish asynchronously (at most `window` awaiting their acknowledgement) for
//     run_s seconds, or `records` records (within run_s), at `rate` records/s (0: unthrottled);
//     every record waits for its stream's acknowledgement (a quorum of the replicas has it),
//     and one not acknowledged within ackTimeout is published again until it is.
//   - consume: read the task's streams from their start with ordered consumers until "stop".
//   - admin (a metadata run's): for run_s seconds, one request after another, each making
//     `topics_per_request` topics "<prefix>-<n>" of `partitions` streams; a request is its
//     stream creates in flight together (JetStream has no batch create) and is answered when
//     every one is. A clustered stream create is answered by the stream's new leader, once the
//     meta group has committed the stream's assignment and its own group elected that leader.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	keySet        = 10000 // KEY_ROUND_ROBIN cycles through this many keys, as the Python drivers
	flushTimeout  = 60 * time.Second
	progressEvery = 200 * time.Millisecond
	adminTimeout  = 60 * time.Second
	// A publish without an acknowledgement after ackTimeout (its stream's leader was killed)
	// is published again until acknowledged, as a Kafka producer retries: its latency runs
	// from the first send, so the failover timeline shows the gap.
	ackTimeout = 2 * time.Second
	// A process's stream creates (or deletes) in flight at once: a request of many topics
	// stays far below a server's JetStream API queue (10,000 requests by default).
	metaWindow = 256
	// A metadata request not answered within this is counted as an error.
	requestTimeout = 30 * time.Second
)

type task struct {
	Role           string   `json:"role"`
	Servers        string   `json:"servers"`
	Streams        []string `json:"streams"`
	Replicas       int      `json:"replicas"`
	MessageSize    int      `json:"message_size"`
	Rate           float64  `json:"rate"`
	RunS           float64  `json:"run_s"`
	Records        int      `json:"records"`
	KeyDistributor string   `json:"key_distributor"`
	Index          int      `json:"index"`
	SamplesPath    string   `json:"samples_path"`
	Window         int      `json:"window"`
	// An admin's (a metadata run's), and the delete role's topics.
	Prefix           string   `json:"prefix"`
	Partitions       int      `json:"partitions"`
	TopicsPerRequest int      `json:"topics_per_request"`
	Topics           []string `json:"topics"`
}

type result struct {
	Records       int     `json:"records"`
	Errors        int     `json:"errors"`
	FirstError    string  `json:"first_error"`
	CPUS          float64 `json:"cpu_s"`
	Requests      int     `json:"requests"`
	LastReceiveNs int64   `json:"last_receive_ns"`
	Leader        string  `json:"leader,omitempty"`
}

var stdout = struct {
	sync.Mutex
	w *bufio.Writer
}{w: bufio.NewWriter(os.Stdout)}

func say(format string, args ...any) {
	stdout.Lock()
	defer stdout.Unlock()
	fmt.Fprintf(stdout.w, format+"\n", args...)
	stdout.w.Flush()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "jsbench: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	if !in.Scan() {
		fail("expected a JSON task on stdin")
	}
	var t task
	if err := json.Unmarshal(in.Bytes(), &t); err != nil {
		fail("the task is not JSON: %v", err)
	}
	nc, err := nats.Connect(t.Servers, nats.Name(fmt.Sprintf("jsbench-%s-%d", t.Role, t.Index)))
	if err != nil {
		fail("connecting to %s: %v", t.Servers, err)
	}
	defer nc.Close()
	window := t.Window
	if window <= 0 {
		window = 1
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(window),
		jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		fail("JetStream context: %v", err)
	}
	var out result
	switch t.Role {
	case "create":
		create(js, t)
	case "delete":
		remove(js, t)
	case "leader":
		out.Leader = leader(js, t)
	case "produce", "consume", "admin":
		say("ready")
		start := waitForGo(in)
		cpuAtGo := cpuSeconds() // connecting is not the run's work
		switch t.Role {
		case "produce":
			out = produce(js, t, start)
		case "admin":
			out = createTopics(js, t, start)
		default:
			out = consume(js, t, start, in)
		}
		out.CPUS = cpuSeconds() - cpuAtGo
	default:
		fail("unknown role %q (create, delete, leader, produce, consume, admin)", t.Role)
	}
	encoded, _ := json.Marshal(out)
	say("result %s", encoded)
}

func waitForGo(in *bufio.Scanner) time.Time {
	for in.Scan() {
		fields := strings.Fields(in.Text())
		if len(fields) == 2 && fields[0] == "go" {
			ns, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				fail("go: %q is not ns since the epoch", fields[1])
			}
			return time.Unix(0, ns)
		}
	}
	fail("stdin closed before \"go\"")
	return time.Time{}
}

// streamName is the stream standing for a partition (as the harness's runner.stream_name).
func streamName(topic string, partition int) string {
	return fmt.Sprintf("%s-p%d", topic, partition)
}

// topicOf is the topic whose partition stream `name` stands for, or "" for another stream.
func topicOf(name string) string {
	cut := strings.LastIndex(name, "-p")
	if cut <= 0 {
		return ""
	}
	if _, err := strconv.ParseUint(name[cut+2:], 10, 31); err != nil {
		return ""
	}
	return name[:cut]
}

func createStream(ctx context.Context, js jetstream.JetStream, name string, replicas int) error {
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     name,
		Subjects: []string{name},
		Replicas: replicas,
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("creating stream %s: %w", name, err)
	}
	return nil
}

// together runs op on every name, at most metaWindow at once; the first error.
func together(names []string, op func(name string) error) error {
	errs := make(chan error, len(names))
	slots := make(chan struct{}, metaWindow)
	for _, name := range names {
		slots <- struct{}{}
		go func() {
			defer func() { <-slots }()
			errs <- op(name)
		}()
	}
	var first error
	for range names {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func create(js jetstream.JetStream, t task) {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	for _, name := range t.Streams {
		if err := createStream(ctx, js, name, t.Replicas); err != nil {
			fail("%v", err)
		}
	}
	for _, name := range t.Streams {
		for leaderOf(ctx, js, name) == "" {
			if ctx.Err() != nil {
				fail("stream %s has no leader after %v", name, adminTimeout)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func remove(js jetstream.JetStream, t task) {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	names := append([]string(nil), t.Streams...)
	if len(t.Topics) > 0 {
		topics := make(map[string]bool, len(t.Topics))
		for _, topic := range t.Topics {
			topics[topic] = true
		}
		lister := js.StreamNames(ctx)
		for name := range lister.Name() {
			if topics[topicOf(name)] {
				names = append(names, name)
			}
		}
		if err := lister.Err(); err != nil {
			fail("listing the streams: %v", err)
		}
	}
	err := together(names, func(name string) error {
		err := js.DeleteStream(ctx, name)
		if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("deleting stream %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		fail("%v", err)
	}
}

// createTopics is the admin role (the package comment): a sample per request answered.
func createTopics(js jetstream.JetStream, t task, start time.Time) result {
	perRequest, partitions := max(t.TopicsPerRequest, 1), max(t.Partitions, 1)
	end := start.Add(time.Duration(t.RunS * float64(time.Second)))
	var got samples
	sent := 0
	for time.Now().Before(end) {
		names := make([]string, 0, perRequest*partitions)
		for k := range perRequest {
			topic := fmt.Sprintf("%s-%d", t.Prefix, sent*perRequest+k)
			for p := range partitions {
				names = append(names, streamName(topic, p))
			}
		}
		sentAt := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		err := together(names, func(name string) error { return createStream(ctx, js, name, t.Replicas) })
		cancel()
		if err != nil {
			got.fail(err)
		} else {
			got.add(sentAt.Sub(start).Seconds(), float64(time.Since(sentAt).Nanoseconds())/1e6)
		}
		sent++
	}
	writeSamples(t.SamplesPath, got.values)
	return result{
		Records:    len(got.values) / 2,
		Errors:     got.errors,
		FirstError: got.firstError,
		Requests:   sent,
	}
}

func leaderOf(ctx context.Context, js jetstream.JetStream, name string) string {
	stream, err := js.Stream(ctx, name)
	if err != nil {
		return ""
	}
	info, err := stream.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

func leader(js jetstream.JetStream, t task) string {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if len(t.Streams) == 0 {
		fail("leader: name a stream")
	}
	name := leaderOf(ctx, js, t.Streams[0])
	if name == "" {
		fail("stream %s has no leader", t.Streams[0])
	}
	return name
}

// picker gives the stream (partition) index of the n-th record, as the Python drivers' keys do.
func picker(t task) func(n int) int {
	count := len(t.Streams)
	switch t.KeyDistributor {
	case "KEY_ROUND_ROBIN":
		slots := make([]int, keySet)
		for i := range slots {
			h := fnv.New32a()
			fmt.Fprintf(h, "key-%d-%d", t.Index, i)
			slots[i] = int(h.Sum32() % uint32(count))
		}
		return func(n int) int { return slots[n%keySet] }
	case "RANDOM_NANO":
		return func(int) int { return rand.Intn(count) }
	default:
		return func(n int) int { return n % count }
	}
}

type samples struct {
	values     []float64 // sent_s, latency_ms pairs
	errors     int
	firstError string
}

func (s *samples) add(sentS, latencyMs float64) { s.values = append(s.values, sentS, latencyMs) }

func (s *samples) fail(err error) {
	if s.errors == 0 {
		s.firstError = err.Error()
	}
	s.errors++
}

func writeSamples(path string, all []float64) {
	buf := make([]byte, 8*len(all))
	for i, v := range all {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		fail("writing samples to %s: %v", path, err)
	}
}

type pending struct {
	future jetstream.PubAckFuture
	sent   time.Time
}

func produce(js jetstream.JetStream, t task, start time.Time) result {
	if len(t.Streams) == 0 {
		fail("produce: name the topic's streams")
	}
	body := make([]byte, t.MessageSize)
	rand.New(rand.NewSource(int64(t.Index))).Read(body)
	pick := picker(t)
	// One goroutine takes the acknowledgements in send order: JetStream acknowledges a
	// stream's records in order, so waiting on the oldest rarely holds a later one back.
	acks := make(chan pending, 2*max(t.Window, 1))
	expired := make(chan struct{})
	var got samples
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for p := range acks {
			select {
			case <-p.future.Ok():
				now := time.Now()
				got.add(p.sent.Sub(start).Seconds(), float64(now.Sub(p.sent).Nanoseconds())/1e6)
			case err := <-p.future.Err():
				if republish(js, p.future.Msg(), expired) {
					now := time.Now()
					got.add(p.sent.Sub(start).Seconds(), float64(now.Sub(p.sent).Nanoseconds())/1e6)
				} else {
					got.fail(err)
				}
			case <-expired:
				got.fail(errors.New("no acknowledgement before the flush timeout"))
			}
		}
	}()
	end := start.Add(time.Duration(t.RunS * float64(time.Second)))
	sent := 0
	var sendErrors samples
	for {
		now := time.Now()
		if (t.Records > 0 && sent >= t.Records) || !now.Before(end) {
			break
		}
		if t.Rate > 0 {
			due := start.Add(time.Duration(float64(sent) / t.Rate * float64(time.Second)))
			if wait := due.Sub(now); wait > time.Millisecond {
				time.Sleep(wait)
			}
		}
		sentAt := time.Now()
		data := make([]byte, len(body))
		copy(data, body)
		binary.BigEndian.PutUint64(data, uint64(sentAt.UnixNano()))
		subject := t.Streams[pick(sent)]
		for {
			future, err := js.PublishAsync(subject, data)
			if err == nil {
				acks <- pending{future, sentAt}
				break
			}
			if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				continue // the window is full: the call waited for room; try again
			}
			sendErrors.fail(err)
			break
		}
		sent++
	}
	timer := time.AfterFunc(flushTimeout, func() { close(expired) })
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(flushTimeout):
	}
	close(acks)
	<-collected
	timer.Stop()
	writeSamples(t.SamplesPath, got.values)
	out := result{
		Records:    len(got.values) / 2,
		Errors:     got.errors + sendErrors.errors,
		FirstError: got.firstError,
		Requests:   sent,
	}
	if out.FirstError == "" {
		out.FirstError = sendErrors.firstError
	}
	return out
}

// republish publishes msg again, waiting for each acknowledgement, until one comes or expired
// is closed; whether it was acknowledged.
func republish(js jetstream.JetStream, msg *nats.Msg, expired <-chan struct{}) bool {
	for {
		select {
		case <-expired:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
		_, err := js.PublishMsg(ctx, &nats.Msg{Subject: msg.Subject, Data: msg.Data})
		cancel()
		if err == nil {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func consume(js jetstream.JetStream, t task, start time.Time, in *bufio.Scanner) result {
	ctx := context.Background()
	startNs := start.UnixNano()
	var received, lastNs atomic.Int64
	perStream := make([]samples, len(t.Streams))
	var contexts []jetstream.ConsumeContext
	for i, name := range t.Streams {
		consumer, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err != nil {
			fail("ordered consumer of %s: %v", name, err)
		}
		got := &perStream[i]
		cc, err := consumer.Consume(func(msg jetstream.Msg) {
			now := time.Now().UnixNano()
			data := msg.Data()
			if len(data) < 8 {
				got.fail(fmt.Errorf("a record of %d bytes carries no send time", len(data)))
				return
			}
			sentNs := int64(binary.BigEndian.Uint64(data))
			got.add(float64(sentNs-startNs)/1e9, float64(now-sentNs)/1e6)
			received.Add(1)
			lastNs.Store(now)
		})
		if err != nil {
			fail("consuming %s: %v", name, err)
		}
		contexts = append(contexts, cc)
	}
	stopped := make(chan struct{})
	go func() {
		for in.Scan() {
			if strings.TrimSpace(in.Text()) == "stop" {
				break
			}
		}
		close(stopped)
	}()
	ticker := time.NewTicker(progressEvery)
	defer ticker.Stop()
	for running := true; running; {
		select {
		case <-ticker.C:
			say("n %d", received.Load())
		case <-stopped:
			running = false
		}
	}
	for _, cc := range contexts {
		cc.Stop()
	}
	for _, cc := range contexts {
		<-cc.Closed()
	}
	var all []float64
	out := result{LastReceiveNs: lastNs.Load()}
	for i := range perStream {
		s := &perStream[i]
		all = append(all, s.values...)
		if s.errors > 0 && out.Errors == 0 {
			out.FirstError = s.firstError
		}
		out.Errors += s.errors
	}
	writeSamples(t.SamplesPath, all)
	out.Records = len(all) / 2
	return out
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	seconds := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return seconds(usage.Utime) + seconds(usage.Stime)
}
