package kvzmq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
)

var (
	// ErrQueueFull is returned by Publish when max_queue_size batches are
	// already waiting; the batch is dropped and counted.
	ErrQueueFull = errors.New("kv event publisher queue full")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("kv event publisher closed")
)

// closeFlushTimeout bounds how long Close waits for queued batches to be
// handed to the socket (vLLM waits 1s, SHUTDOWN_TIMEOUT).
const closeFlushTimeout = 2 * time.Second

// dialRetry is how often a connecting socket retries an endpoint nobody
// listens on yet; libzmq's connect is asynchronous and retries forever, so
// zmq4's dialers are told to do the same.
const dialRetry = 100 * time.Millisecond

// endOfReplay is the replay end marker's sequence frame: -1 as 8 signed
// big-endian bytes.
var endOfReplay = binary.BigEndian.AppendUint64(nil, kvevents.EndOfReplaySeq)

// PublisherStats counts what a Publisher did.
type PublisherStats struct {
	Published      uint64 // batches sent, seq 0..Published-1
	QueueFull      uint64 // batches refused by Publish with ErrQueueFull
	EncodeErrors   uint64 // batches dropped because they could not be encoded
	ReplayRequests uint64 // replay requests served
}

// Publisher is vLLM's ZmqEventPublisher: Publish queues a batch without
// blocking; a goroutine numbers, encodes and sends the batches in order
// and keeps the last buffer_steps of them for the replay socket.
type Publisher struct {
	log    zerolog.Logger
	enc    kvevents.Encoding
	topic  []byte
	dpRank int64
	// replayTopic: the replay replies carry the topic frame (ReplayTopic).
	replayTopic bool

	pub    zmq4.Socket
	router zmq4.Socket // nil without replay
	cancel context.CancelFunc

	endpoint       string
	replayEndpoint string

	// mu orders Publish against Close so no batch is queued after the
	// sender stopped draining.
	mu      sync.RWMutex
	closed  bool
	queue   chan kvevents.Batch
	closing chan struct{}
	sent    chan struct{} // closed when the sender goroutine returns
	wg      sync.WaitGroup

	replay replayBuffer

	published, queueFull, encodeErrors, replayRequests atomic.Uint64
}

// NewPublisher opens the PUB socket (binding or connecting by vLLM's
// heuristic, after offsetting its port by cfg.DataParallelRank) and the
// replay ROUTER socket if cfg has one, and starts sending. It ignores
// cfg.EnableKVCacheEvents and cfg.Publisher: deciding whether to publish
// at all is the caller's (see Config.Enabled).
//
// Binding endpoints may use port "*" (e.g. "tcp://127.0.0.1:*") to take a
// free port; Endpoint and ReplayEndpoint report what was bound.
func NewPublisher(cfg Config, enc kvevents.Encoding, log zerolog.Logger) (*Publisher, error) {
	p, err := newPublisher(cfg, enc, log)
	if err != nil {
		return nil, err
	}
	p.start()
	return p, nil
}

// newPublisher opens the sockets without starting the sender, so tests can
// fill the queue.
func newPublisher(cfg Config, enc kvevents.Encoding, log zerolog.Logger) (*Publisher, error) {
	cfg.EnableKVCacheEvents, cfg.Publisher = true, PublisherZMQ
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := kvevents.AppendEncode(nil, &kvevents.Batch{}, enc); err != nil {
		return nil, fmt.Errorf("kv event publisher: %w", err)
	}
	endpoint, err := OffsetEndpointPort(cfg.Endpoint, cfg.DataParallelRank)
	if err != nil {
		return nil, err
	}
	replayEndpoint, err := OffsetEndpointPort(cfg.ReplayEndpoint, cfg.DataParallelRank)
	if err != nil {
		return nil, err
	}

	log = log.With().Str("component", "kvzmq").Logger()
	ctx, cancel := context.WithCancel(context.Background())
	zlog := stdlog.New(log.With().Str("source", "zmq4").Logger(), "", 0)
	p := &Publisher{
		log:    log,
		enc:    enc,
		topic:  []byte(cfg.Topic),
		dpRank: int64(cfg.DataParallelRank),
		// An empty format is the newest, as everywhere else.
		replayTopic: cfg.ReplayFormat != ReplayLegacy,
		cancel:      cancel,
		queue:       make(chan kvevents.Batch, cfg.MaxQueueSize),
		closing:     make(chan struct{}),
		sent:        make(chan struct{}),
		replay:      replayBuffer{max: cfg.BufferSteps},
	}

	bind := Binds(endpoint)
	if bind {
		endpoint = onHost(endpoint, cfg.BindHost)
	}
	replayEndpoint = onHost(replayEndpoint, cfg.BindHost)
	opts := []zmq4.Option{zmq4.WithLogger(zlog)}
	if !bind {
		opts = append(opts, zmq4.WithDialerRetry(dialRetry), zmq4.WithDialerMaxRetries(-1), zmq4.WithAutomaticReconnect(true))
	}
	p.pub = zmq4.NewPub(ctx, opts...)
	if cfg.HWM > 0 {
		if err := p.pub.SetOption(zmq4.OptionHWM, cfg.HWM); err != nil {
			p.abort()
			return nil, fmt.Errorf("kv event publisher: set hwm: %w", err)
		}
	}
	if bind {
		if err := p.pub.Listen(endpoint); err != nil {
			p.abort()
			return nil, fmt.Errorf("kv event publisher: bind %s: %w", endpoint, err)
		}
		p.endpoint = boundEndpoint(endpoint, p.pub.Addr())
	} else {
		// libzmq connects in the background and so does this: the engine
		// must not wait for its consumer to come up.
		p.endpoint = endpoint
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if err := p.pub.Dial(endpoint); err != nil && ctx.Err() == nil {
				p.log.Error().Err(err).Str("endpoint", endpoint).Msg("kv event publisher connect failed")
			}
		}()
	}

	if replayEndpoint != "" {
		p.router = zmq4.NewRouter(ctx, zmq4.WithLogger(zlog))
		if err := p.router.Listen(replayEndpoint); err != nil {
			p.abort()
			return nil, fmt.Errorf("kv event publisher: bind replay %s: %w", replayEndpoint, err)
		}
		p.replayEndpoint = boundEndpoint(replayEndpoint, p.router.Addr())
	}
	return p, nil
}

func (p *Publisher) start() {
	go p.send()
	if p.router != nil {
		p.wg.Add(1)
		go p.serveReplay()
	}
	ev := p.log.Info().Str("endpoint", p.endpoint).Str("replay_endpoint", p.replayEndpoint).
		Str("encoding", p.enc.String())
	if p.router != nil {
		format := ReplayTopic
		if !p.replayTopic {
			format = ReplayLegacy
		}
		ev = ev.Str("replay_format", format)
	}
	ev.Msg("kv event publisher started")
}

// abort releases the sockets of a publisher that failed to start.
func (p *Publisher) abort() {
	p.cancel()
	p.pub.Close()
	if p.router != nil {
		p.router.Close()
	}
	p.wg.Wait()
}

// boundEndpoint turns a bound listener address into an endpoint a client on
// this host can dial: a wildcard host becomes loopback.
func boundEndpoint(endpoint string, addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !strings.HasPrefix(endpoint, "tcp://") {
		return endpoint
	}
	ip := tcp.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
		if strings.Contains(endpoint, "::") {
			ip = net.IPv6loopback
		}
	}
	return "tcp://" + net.JoinHostPort(ip.String(), fmt.Sprint(tcp.Port))
}

// Endpoint is the PUB endpoint: the bound address (dialable from this
// host) when the publisher binds, else the endpoint it connects to.
func (p *Publisher) Endpoint() string { return p.endpoint }

// ReplayEndpoint is the bound replay address, or "" without replay.
func (p *Publisher) ReplayEndpoint() string { return p.replayEndpoint }

// Stats reports the publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{
		Published:      p.published.Load(),
		QueueFull:      p.queueFull.Load(),
		EncodeErrors:   p.encodeErrors.Load(),
		ReplayRequests: p.replayRequests.Load(),
	}
}

// Publish queues b and returns at once: ErrQueueFull when max_queue_size
// batches are waiting (b is dropped), ErrClosed after Close. Like vLLM it
// stamps the publisher's data-parallel rank on a batch that has none.
//
// The publisher takes b: it is encoded later, on the sender goroutine, so
// the caller must not modify b's events after the call.
func (p *Publisher) Publish(b kvevents.Batch) error {
	if b.DataParallelRank == nil {
		b.DataParallelRank = &p.dpRank
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrClosed
	}
	select {
	case p.queue <- b:
		return nil
	default:
		p.queueFull.Add(1)
		return ErrQueueFull
	}
}

// send is the sender goroutine: it numbers batches in queue order, so seq
// is contiguous over what was actually sent.
func (p *Publisher) send() {
	defer close(p.sent)
	var seq uint64
	sendOne := func(b kvevents.Batch) {
		// Each payload is retained by the replay buffer and by zmq4's send
		// queue, so it gets its own buffer.
		payload, err := kvevents.AppendEncode(make([]byte, 0, p.replay.sizeHint()), &b, p.enc)
		if err != nil {
			p.encodeErrors.Add(1)
			p.log.Error().Err(err).Int("events", len(b.Events)).Msg("kv event batch dropped")
			return
		}
		seqFrame := binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq)
		if err := p.pub.Send(zmq4.NewMsgFrom(p.topic, seqFrame, payload)); err != nil {
			p.log.Warn().Err(err).Uint64("seq", seq).Msg("kv event batch send failed")
		}
		p.replay.add(seq, payload)
		seq++
		p.published.Add(1)
	}
	for {
		select {
		case b := <-p.queue:
			sendOne(b)
		case <-p.closing:
			deadline := time.After(closeFlushTimeout)
			for {
				select {
				case b := <-p.queue:
					sendOne(b)
				case <-deadline:
					p.log.Warn().Int("queued", len(p.queue)).Msg("kv event publisher closed before its queue drained")
					return
				default:
					return
				}
			}
		}
	}
}

// serveReplay answers replay requests on the ROUTER socket. It runs apart
// from the sender, so a slow replay client never delays live events.
func (p *Publisher) serveReplay() {
	defer p.wg.Done()
	for {
		msg, err := p.router.Recv()
		if err != nil {
			select {
			case <-p.closing:
				return
			default:
			}
			if errors.Is(err, context.Canceled) {
				return
			}
			p.log.Debug().Err(err).Msg("kv event replay receive failed")
			continue
		}
		if len(msg.Frames) != 3 {
			p.log.Warn().Int("frames", len(msg.Frames)).Msg("invalid kv event replay request")
			continue
		}
		id, start := msg.Frames[0], msg.Frames[2]
		p.replayRequests.Add(1)
		entries := p.replay.since(startSeq(start))
		for _, e := range entries {
			seqFrame := binary.BigEndian.AppendUint64(make([]byte, 0, 8), e.seq)
			if err := p.router.Send(p.replayReply(id, p.topic, seqFrame, e.payload)); err != nil {
				p.log.Warn().Err(err).Msg("kv event replay send failed")
				break
			}
		}
		if err := p.router.Send(p.replayReply(id, []byte{}, endOfReplay, []byte{})); err != nil {
			p.log.Warn().Err(err).Msg("kv event replay send failed")
		}
	}
}

// replayReply frames one replay answer as the configured vLLM does:
// [id, "", topic, seq, payload] (ReplayTopic; the end marker's topic and
// payload are empty) or [id, "", seq, payload] (ReplayLegacy).
func (p *Publisher) replayReply(id, topic, seq, payload []byte) zmq4.Msg {
	if p.replayTopic {
		return zmq4.NewMsgFrom(id, []byte{}, topic, seq, payload)
	}
	return zmq4.NewMsgFrom(id, []byte{}, seq, payload)
}

// startSeq reads a replay request's start as vLLM does (int.from_bytes,
// big-endian, any length); a value beyond 64 bits is past every seq.
func startSeq(b []byte) uint64 {
	for len(b) > 8 {
		if b[0] != 0 {
			return ^uint64(0)
		}
		b = b[1:]
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// Close stops accepting batches, waits up to two seconds for the queued
// ones to be handed to the socket, and closes the sockets. As in vLLM
// (linger 0), batches still inside the socket's own send queue at that
// point may not reach subscribers.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	p.mu.Unlock()

	<-p.sent // bounded by closeFlushTimeout
	p.cancel()
	err := p.pub.Close()
	if p.router != nil {
		if rerr := p.router.Close(); err == nil {
			err = rerr
		}
	}
	p.wg.Wait()
	p.log.Info().Uint64("published", p.published.Load()).Uint64("queue_full", p.queueFull.Load()).Msg("kv event publisher closed")
	if err != nil {
		return fmt.Errorf("close kv event publisher: %w", err)
	}
	return nil
}

type replayEntry struct {
	seq     uint64
	payload []byte
}

// replayBuffer keeps the last max (seq, payload) pairs in a ring.
type replayBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []replayEntry
	start   int // index of the oldest entry once the ring is full
	lastLen atomic.Int64
}

func (r *replayBuffer) sizeHint() int { return int(r.lastLen.Load()) + 64 }

func (r *replayBuffer) add(seq uint64, payload []byte) {
	r.lastLen.Store(int64(len(payload)))
	if r.max == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < r.max {
		r.buf = append(r.buf, replayEntry{seq, payload})
		return
	}
	r.buf[r.start] = replayEntry{seq, payload}
	r.start = (r.start + 1) % r.max
}

// since copies out the entries with seq >= from, oldest first. Seqs in the
// ring are consecutive, so the first one to send is found by arithmetic.
func (r *replayBuffer) since(from uint64) []replayEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.buf)
	if n == 0 {
		return nil
	}
	oldest := r.buf[r.start].seq
	skip := 0
	if from > oldest {
		if from-oldest >= uint64(n) {
			return nil
		}
		skip = int(from - oldest)
	}
	out := make([]replayEntry, 0, n-skip)
	for i := skip; i < n; i++ {
		out = append(out, r.buf[(r.start+i)%n])
	}
	return out
}
