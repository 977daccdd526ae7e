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
		frames := msg.Frames
		// The ROUTER sends [identity, "", seq, payload]; a DEALER keeps the
		// empty delimiter.
		if len(frames) == 3 && len(frames[0]) == 0 {
			frames = frames[1:]
		}
		if len(frames) != 2 || len(frames[0]) != 8 {
			return fmt.Errorf("replay from %s: %w: %d frames", replayEndpoint, ErrMalformed, len(msg.Frames))
		}
		if bytes.Equal(frames[0], endOfReplay) {
			return nil
		}
		seq := binary.BigEndian.Uint64(frames[0])
		if err := fn(seq, frames[1]); err != nil {
			return fmt.Errorf("replay from %s: seq %d: %w", replayEndpoint, seq, err)
		}
	}
}

// ctxErr prefers ctx's error: zmq4 reports a cancelled socket context as
// its own error.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
