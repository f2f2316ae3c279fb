/* SPDX-License-Identifier: MIT */
/*
 * Relays (PROTO_CAP_RELAY): RELAY, the chain of destinations a push goes on
 * to after the daemon that receives it, with the tickets the original client
 * signed for them (src/relay_ticket.h), and RELAY_RESULT, what became of one
 * of those destinations. Encoders and decoders: proto/msg_relay.c. Included
 * by msg.h.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct rbuf;
struct wbuf;

#define PROTO_MAX_RELAY_HOPS 16
/* A tree's fan-out at most (MSG_RELAY's tree trailer); 1 is a chain. */
#define PROTO_MAX_RELAY_FANOUT 16
#define PROTO_MAX_HOST	       255
#define PROTO_MAX_RELAY_TICKET (16u << 10)

/* One destination after the receiving daemon. */
struct proto_relay_hop {
	char *host;	     /* 1..PROTO_MAX_HOST bytes, allocated by decode */
	uint16_t port;	     /* non-zero */
	char *path;	     /* MODULE/REL, 1..PROTO_MAX_PATH bytes, allocated by decode */
	uint8_t *ticket;     /* allocated by decode */
	uint32_t ticket_len; /* 1..PROTO_MAX_RELAY_TICKET */
};

/*
 * One hop's encoding, the one codec of every message that carries hops
 * (MSG_RELAY, the relay feed's START): host str16 | port u16 | path str16 |
 * ticket (u32 length, bytes). enc: -EMSGSIZE when h cannot be written (no
 * host or path, a ticket past its cap); values the decoder refuses are
 * written as they are. dec: -EBADMSG (r->error set) unless the hop is
 * valid; what it allocated stays in *h for proto_relay_hop_clear.
 */
int proto_relay_hop_enc(struct wbuf *w, const struct proto_relay_hop *h);
int proto_relay_hop_dec(struct rbuf *r, struct proto_relay_hop *h);
/* A host of 1..PROTO_MAX_HOST bytes, a non-zero port, a path, a ticket of 1..cap bytes. */
bool proto_relay_hop_valid(const struct proto_relay_hop *h);
/* Frees what h holds (decode's allocations) and zeroes it. */
void proto_relay_hop_clear(struct proto_relay_hop *h);

/* A MSG_RELAY with count 0 and no self ticket is malformed. */
struct msg_relay {
	/*
	 * The ticket FOR the daemon receiving this message: empty (len 0) when the sender
	 * is the original client itself; a relay child (hop k-1) sends the ticket the
	 * original client made for hop k, which hop k checks.
	 */
	uint8_t *self_ticket;	      /* allocated by decode */
	uint32_t self_ticket_len;     /* 0..PROTO_MAX_RELAY_TICKET */
	uint8_t count;		      /* 0..PROTO_MAX_RELAY_HOPS: the hops AFTER the receiver */
	struct proto_relay_hop *hops; /* allocated by decode */
	/*
	 * 0 or 1: a chain (no trailer on the wire); 2..PROTO_MAX_RELAY_FANOUT
	 * (PROTO_CAP_RELAY_TREE): the hops are a tree of that fan-out, laid out
	 * as src/relay_tree.h says (each next hop followed by its subtree).
	 */
	uint8_t fanout;
};

/*
 * Whether two destinations are the same: host (no case), port and path
 * (a '/' at its end aside). A RELAY naming one twice is malformed.
 */
bool proto_relay_same_dest(const char *host1, uint16_t port1, const char *path1, const char *host2,
			   uint16_t port2, const char *path2);

enum proto_relay_status {
	PROTO_RELAY_COPIED = 1,	   /* every entry committed there */
	PROTO_RELAY_PARTIAL = 2,   /* some committed, some failed; a --partial re-run resumes */
	PROTO_RELAY_FAILED = 3,	   /* the session there failed */
	PROTO_RELAY_UNREACHED = 4, /* never connected or refused before any data */
};
#define PROTO_RELAY_STATUS_MAX PROTO_RELAY_UNREACHED

struct msg_relay_result {
	uint8_t index;	   /* 1 = the answering daemon's next hop, in the chain it was given */
	uint8_t status;	   /* enum proto_relay_status */
	uint8_t exit_code; /* the relay client's exit code for that destination (src/exitcodes.h) */
	uint64_t files_ok, files_failed, bytes;
	char *host; /* allocated by decode, 1..PROTO_MAX_HOST bytes */
	char *text; /* allocated by decode, <= PROTO_MAX_TEXT, "" when copied */
};
