package bridge

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrFrame is wrapped by every error about a ZMQ message that is not one KV event message.
var ErrFrame = errors.New("malformed zmq message")

// endSeq is the sequence number of the replay sentinel: -1 as a signed 8-byte big-endian integer
// (vLLM ZmqEventPublisher.END_SEQ).
const endSeq = ^uint64(0)

// Message is one engine batch as received: the sequence number and the msgpack payload, unchanged.
type Message struct {
	Seq     uint64
	Payload []byte
}

// ParseFrames checks a published message [topic, seq (8 bytes, big-endian), payload] and returns its
// sequence number and payload. The payload is not decoded.
func ParseFrames(parts [][]byte) (Message, error) {
	if len(parts) != 3 {
		return Message{}, fmt.Errorf("%w: %d frames, want 3 (topic, seq, payload)", ErrFrame, len(parts))
	}
	seq, err := parseSeq(parts[1])
	if err != nil {
		return Message{}, err
	}
	return Message{Seq: seq, Payload: parts[2]}, nil
}

// parseReplayFrames checks one reply of the engine's replay socket as a DEALER receives it:
// [b"", seq, payload] (SGLang, vLLM before the topic frame) or [b"", topic, seq, payload] (newer
// vLLM). end is true for the sentinel (seq = -1).
func parseReplayFrames(parts [][]byte) (m Message, end bool, err error) {
	if len(parts) < 1 || len(parts[0]) != 0 {
		return Message{}, false, fmt.Errorf("%w: replay reply without the empty delimiter frame", ErrFrame)
	}
	parts = parts[1:]
	var seqF, payload []byte
	switch len(parts) {
	case 2:
		seqF, payload = parts[0], parts[1]
	case 3:
		seqF, payload = parts[1], parts[2]
	default:
		return Message{}, false, fmt.Errorf("%w: replay reply of %d frames after the delimiter, want 2 or 3", ErrFrame, len(parts))
	}
	seq, err := parseSeq(seqF)
	if err != nil {
		return Message{}, false, err
	}
	if seq == endSeq {
		return Message{}, true, nil
	}
	return Message{Seq: seq, Payload: payload}, false, nil
}

func parseSeq(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: sequence frame of %d bytes, want 8", ErrFrame, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// seqBytes encodes a sequence number as the engine does: 8 bytes, big-endian.
func seqBytes(seq uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return b[:]
}
