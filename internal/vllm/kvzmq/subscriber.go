package kvzmq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"sync"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"
	"github.com/rs/zerolog"
)

// ErrMalformed marks a message that is not [topic, 8-byte seq, payload].
// Recv skipped it; the subscriber keeps working.
var ErrMalformed = errors.New("malformed kv event message")

// Message is one undecoded KV event message; decode Payload with a
// kvevents.Decoder. Payload is the caller's to keep.
type Message struct {
	Topic   string
	Seq     uint64
	Payload []byte
}

// SubscriberOption configures a Subscriber.
type SubscriberOption func(*subscriberOptions)

type subscriberOptions struct {
	log zerolog.Logger
}

// WithLogger sends the socket's own diagnostics to log (default: dropped).
func WithLogger(log zerolog.Logger) SubscriberOption {
	return func(o *subscriberOptions) { o.log = log }
}

// Subscriber is a SUB socket receiving one topic prefix.
type Subscriber struct {
	sock     zmq4.Socket
	cancel   context.CancelFunc
	topic    string
	endpoint string

	msgs chan zmq4.Msg
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	connErrors atomic.Uint64
}

// DialSubscriber connects to a PUB socket that binds (vLLM's default,
// "tcp://*:5557") and subscribes to topic (a prefix; "" is everything). It
// returns once connected, retrying a refused connection until ctx ends;
// after that, a lost connection is re-dialled in the background.
func DialSubscriber(ctx context.Context, endpoint, topic string, opts ...SubscriberOption) (*Subscriber, error) {
	s, sctx := newSubscriber(topic, opts, zmq4.WithDialerRetry(dialRetry), zmq4.WithDialerMaxRetries(-1), zmq4.WithAutomaticReconnect(true))
	if err := dial(ctx, s.sock, s.cancel, endpoint); err != nil {
		s.cancel()
		s.sock.Close()
		return nil, fmt.Errorf("kv event subscriber: dial %s: %w", endpoint, err)
	}
	s.endpoint = endpoint
	s.start(sctx)
	return s, nil
}

// ListenSubscriber binds a SUB socket that PUB sockets connect to (vLLM
// publishers with a non-wildcard endpoint), subscribed to topic. Port "0"
// or "*" takes a free port; Endpoint reports it. ctx only bounds the setup.
func ListenSubscriber(ctx context.Context, endpoint, topic string, opts ...SubscriberOption) (*Subscriber, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, sctx := newSubscriber(topic, opts)
	if err := s.sock.Listen(endpoint); err != nil {
		s.cancel()
		s.sock.Close()
		return nil, fmt.Errorf("kv event subscriber: bind %s: %w", endpoint, err)
	}
	s.endpoint = boundEndpoint(endpoint, s.sock.Addr())
	s.start(sctx)
	return s, nil
}

func newSubscriber(topic string, opts []SubscriberOption, zopts ...zmq4.Option) (*Subscriber, context.Context) {
	o := subscriberOptions{log: zerolog.Nop()}
	for _, opt := range opts {
		opt(&o)
	}
	sctx, cancel := context.WithCancel(context.Background())
	zopts = append(zopts, zmq4.WithLogger(stdlog.New(zerologWriter(o.log), "", 0)))
	sock := zmq4.NewSub(sctx, zopts...)
	// Subscribing before connecting: zmq4 sends the subscription to every
	// peer as it connects.
	_ = sock.SetOption(zmq4.OptionSubscribe, topic)
	return &Subscriber{
		sock:   sock,
		cancel: cancel,
		topic:  topic,
		msgs:   make(chan zmq4.Msg, 64),
		stop:   make(chan struct{}),
	}, sctx
}

var discardLogger = stdlog.New(io.Discard, "", 0)

func zerologWriter(log zerolog.Logger) io.Writer {
	if log.GetLevel() == zerolog.Disabled {
		return io.Discard
	}
	return log.With().Str("component", "kvzmq").Str("source", "zmq4").Logger()
}

// start runs the goroutine that turns zmq4's blocking Recv into a channel
// Recv can select on with a context.
func (s *Subscriber) start(sctx context.Context) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			msg, err := s.sock.Recv()
			if err != nil {
				if sctx.Err() != nil {
					return
				}
				// zmq4 reports each lost peer connection as a receive
				// error; the socket itself is fine.
				s.connErrors.Add(1)
				continue
			}
			select {
			case s.msgs <- msg:
			case <-s.stop:
				return
			}
		}
	}()
}

// Endpoint is the endpoint dialled, or the bound address (dialable from
// this host) for a listening subscriber.
func (s *Subscriber) Endpoint() string { return s.endpoint }

// ConnectionErrors counts peer connections lost so far.
func (s *Subscriber) ConnectionErrors() uint64 { return s.connErrors.Load() }

// Recv waits for the next message of the subscribed topic. It returns
// ctx's error when ctx ends, ErrClosed after Close, and an error wrapping
// ErrMalformed for a message that was not three frames with an 8-byte
// sequence (that message is dropped; keep receiving).
func (s *Subscriber) Recv(ctx context.Context) (Message, error) {
	select {
	case msg := <-s.msgs:
		if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 {
			return Message{}, fmt.Errorf("%w: %d frames, sequence of %d bytes", ErrMalformed, len(msg.Frames), frameLen(msg.Frames, 1))
		}
		topic := msg.Frames[0]
		if len(topic) < len(s.topic) || string(topic[:len(s.topic)]) != s.topic {
			return Message{}, fmt.Errorf("%w: topic %q outside subscription %q", ErrMalformed, topic, s.topic)
		}
		return Message{
			Topic:   string(topic),
			Seq:     binary.BigEndian.Uint64(msg.Frames[1]),
			Payload: msg.Frames[2],
		}, nil
	case <-ctx.Done():
		return Message{}, ctx.Err()
	case <-s.stop:
		return Message{}, ErrClosed
	}
}

func frameLen(frames [][]byte, i int) int {
	if i < len(frames) {
		return len(frames[i])
	}
	return 0
}

// Close closes the socket; a blocked Recv returns ErrClosed. Cancelling the
// socket's context lets zmq4 close a peer connection on its own, racing the
// Close below; a connection already closed that way is not an error.
func (s *Subscriber) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		s.cancel()
		err = s.sock.Close()
		s.wg.Wait()
	})
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("close kv event subscriber: %w", err)
	}
	return nil
}

// dial connects sock, giving up when ctx ends. zmq4's Dial blocks, retrying
// per the socket's options, and only stops when the socket's own context is
// cancelled; cancelSock does that.
func dial(ctx context.Context, sock zmq4.Socket, cancelSock context.CancelFunc, endpoint string) error {
	errc := make(chan error, 1)
	go func() { errc <- sock.Dial(endpoint) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		cancelSock()
		<-errc
		return ctx.Err()
	}
}
