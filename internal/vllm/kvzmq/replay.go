package kvzmq

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/go-zeromq/zmq4"
)

// Replay asks a publisher's replay socket for every batch it still holds
// with seq >= startSeq and calls fn for each, oldest first, until the end
// marker. A publisher keeps only its last buffer_steps batches, so the
// first seq fn sees may be above startSeq: that gap is lost for good.
//
// It reads both of vLLM's reply shapes (see the package doc): with the
// topic frame (vLLM #45177 on, llm-d-inference-sim) and without it. The
// replayed topic is the worker's own and is not checked.
//
// It uses a DEALER socket, so it needs no state between calls. Give ctx a
// deadline: the replay socket may be unreachable. An error from fn stops
// the replay and is returned wrapped.
func Replay(ctx context.Context, replayEndpoint string, startSeq uint64, fn func(seq uint64, payload []byte) error) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dealer := zmq4.NewDealer(sctx, zmq4.WithDialerRetry(dialRetry), zmq4.WithDialerMaxRetries(-1),
		zmq4.WithLogger(discardLogger))
	defer dealer.Close()

	if err := dial(ctx, dealer, cancel, replayEndpoint); err != nil {
		return fmt.Errorf("replay from %s: dial: %w", replayEndpoint, err)
	}
	req := zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, startSeq))
	if err := dealer.Send(req); err != nil {
		return fmt.Errorf("replay from %s: send request: %w", replayEndpoint, ctxErr(ctx, err))
	}
	for {
		msg, err := dealer.Recv()
		if err != nil {
			return fmt.Errorf("replay from %s: %w", replayEndpoint, ctxErr(ctx, err))
		}
		seqFrame, payload, err := replayFrames(msg.Frames)
		if err != nil {
			return fmt.Errorf("replay from %s: %w", replayEndpoint, err)
		}
		if bytes.Equal(seqFrame, endOfReplay) {
			return nil
		}
		seq := binary.BigEndian.Uint64(seqFrame)
		if err := fn(seq, payload); err != nil {
			return fmt.Errorf("replay from %s: seq %d: %w", replayEndpoint, seq, err)
		}
	}
}

// replayFrames takes the sequence and payload frames out of one reply as
// the DEALER receives it. The ROUTER strips the identity frame; the DEALER
// keeps the empty delimiter after it. So vLLM's replies arrive as
//
//	["", topic, seq, payload]   vLLM #45177 on (end: ["", "", END_SEQ, ""])
//	["", seq, payload]          before it      (end: ["", END_SEQ, ""])
//
// and, from a ROUTER that sends no delimiter, as [topic, seq, payload] or
// [seq, payload]. A leading empty frame of a 3- or 4-frame reply is the
// delimiter; ["", seq, payload] read either way (delimiter, or an empty
// topic) gives the same batch.
func replayFrames(frames [][]byte) (seq, payload []byte, err error) {
	f := frames
	if (len(f) == 3 || len(f) == 4) && len(f[0]) == 0 {
		f = f[1:]
	}
	switch len(f) {
	case 2: // [seq, payload]
		seq, payload = f[0], f[1]
	case 3: // [topic, seq, payload]
		seq, payload = f[1], f[2]
	default:
		return nil, nil, fmt.Errorf("%w: %d frames (want [\"\", topic, seq, payload] or [\"\", seq, payload])", ErrMalformed, len(frames))
	}
	if len(seq) != 8 {
		return nil, nil, fmt.Errorf("%w: %d-frame reply with a sequence of %d bytes, want 8", ErrMalformed, len(frames), len(seq))
	}
	return seq, payload, nil
}

// ctxErr prefers ctx's error: zmq4 reports a cancelled socket context as
// its own error.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
