/* SPDX-License-Identifier: MIT */
/*
 * Sealed lanes: an AEAD for every frame a tcp lane carries (AES-256-GCM, or
 * with PROTO_CAP_SEAL_SUITES the suite the daemon picked, see
 * enum lane_seal_suite).
 *
 * Both ends of a transfer hold one 32-byte secret exported from the TLS
 * control channel and bound to that transfer (lane_seal_export). Each lane
 * and direction gets its own key from it (HKDF-SHA256, info names the lane
 * and the direction), and each frame its own nonce: a 4-byte prefix
 * (lane, direction) and a 64-bit count of the frames sent that way on that
 * lane. The count never repeats and both ends keep it, so a frame replayed,
 * dropped, reordered or moved to another lane fails its tag; the frame header
 * is the additional data, so a frame whose header is changed (another slot,
 * another length) fails too. Wire format: docs/XPORT_TCP.md "Sealed lanes".
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LANE_SEAL_SECRET_LEN 32
#define LANE_SEAL_KEY_LEN    32
#define LANE_SEAL_TAG_LEN    16
#define LANE_SEAL_NONCE_LEN  12
/*
 * RFC 8446 7.5 exporter labels. v1: no context, so the same secret for every
 * transfer of a connection (peers without PROTO_CAP_TRANSFER_KEYS). v2: the
 * context is the transfer's kind and OPEN_OK's one-time token.
 */
#define LANE_SEAL_EXPORT_LABEL	  "EXPORTER-rdmacp-lane-seal-v1"
#define LANE_SEAL_EXPORT_LABEL_V2 "EXPORTER-rdmacp-lane-seal-v2"

/* The kind of a sealed transfer: the first byte of its v2 exporter context. */
enum lane_seal_purpose {
	LANE_SEAL_PUSH = 1,
	LANE_SEAL_PULL = 2,
	LANE_SEAL_BENCH = 3,
};

struct tls_conn;

/*
 * The AEAD that seals a transfer's lanes. AES-256-GCM is every peer's and the
 * only one without PROTO_CAP_SEAL_SUITES; with it the daemon picks one (its
 * "cipher" key, else the fastest here: lane_seal_suite_fastest) and names it
 * in OPEN_OK's lanes byte, which TLS authenticates. Each suite's keys have
 * their own HKDF info, so two ends that disagree on the suite fail the first
 * frame rather than talk.
 */
enum lane_seal_suite {
	LANE_SEAL_AES256_GCM = 1,
	LANE_SEAL_AES128_GCM = 2,
	LANE_SEAL_CHACHA20_POLY1305 = 3,
};
#define LANE_SEAL_NSUITES 3

/* "aes-256-gcm", "aes-128-gcm", "chacha20-poly1305"; NULL for no suite. */
const char *lane_seal_suite_name(enum lane_seal_suite suite);
/* The same as people write it, for logs: "AES-256-GCM", "ChaCha20-Poly1305". */
const char *lane_seal_suite_title(enum lane_seal_suite suite);
/* The suite a name (as lane_seal_suite_name gives it) names: 0, or -EINVAL. */
int lane_seal_suite_parse(const char *name, enum lane_seal_suite *ret_suite);
/* OPEN_OK's lanes byte (enum proto_lanes) for a suite, and the suite of one (0: clear). */
uint8_t lane_seal_suite_lanes(enum lane_seal_suite suite);
enum lane_seal_suite lane_seal_lanes_suite(uint8_t lanes);

/*
 * The suite that seals fastest on this CPU: each one times a few short runs
 * (thread CPU time, best of several, interleaved: a busy machine slows all
 * alike), once per process, about a millisecond. AES-256-GCM unless another
 * beats it by LANE_SEAL_SUITE_MARGIN percent.
 */
#define LANE_SEAL_SUITE_MARGIN 5
enum lane_seal_suite lane_seal_suite_fastest(void);
/* Bytes per second each suite sealed in the measurement (index: suite - 1). */
void lane_seal_suite_rates(double ret_rates[LANE_SEAL_NSUITES]);

struct lane_seal {
	void *ctx; /* EVP_CIPHER_CTX */
	uint32_t prefix;
	uint64_t count; /* frames begun so far */
	bool encrypt;
};

/*
 * The secret of one sealed transfer (OPEN or BENCH) on control connection
 * tls, the same at both ends; every caller, daemon and client, goes through
 * here. both_caps: the HELLO capabilities both ends announced. With
 * PROTO_CAP_TRANSFER_KEYS the v2 label binds it to purpose and token (OPEN_OK's,
 * tokenlen 1..64 bytes), so each transfer counts its nonces from 0 under keys
 * of its own. Without, v1 gives every transfer of the connection the same
 * secret, and a second one would repeat the first one's nonces under the same
 * keys: only the connection's first sealed transfer may have it, any later one
 * is -EKEYREJECTED. *nsealed counts the connection's sealed transfers (0 when
 * it opens) and grows by one on success. -EINVAL, -EIO from the export.
 */
int lane_seal_export(struct tls_conn *tls, uint64_t both_caps, enum lane_seal_purpose purpose,
		     const uint8_t *token, size_t tokenlen, unsigned *nsealed,
		     uint8_t ret_secret[LANE_SEAL_SECRET_LEN]);

/*
 * The key of one lane and direction. from_connector: frames the side that
 * connected the lanes sends. Returns 0 or -EIO.
 */
int lane_seal_derive(const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane, bool from_connector,
		     uint8_t ret_key[LANE_SEAL_KEY_LEN]);

/* encrypt: we send this way (seal); else we receive it (open). AES-256-GCM. */
int lane_seal_init(struct lane_seal *s, const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane,
		   bool from_connector, bool encrypt);
/* The same under suite: its own key (HKDF info names the suite), -EINVAL for no suite. */
int lane_seal_init_suite(struct lane_seal *s, enum lane_seal_suite suite,
			 const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane,
			 bool from_connector, bool encrypt);
void lane_seal_fini(struct lane_seal *s);

/*
 * Sealed slots (verbs lanes: the engine seals, see engine_lane.c): the key of
 * lane's slots, which only the sender of a session's data seals (encrypt)
 * and only its receiver opens. Its own HKDF info ("rdmacp slot key v1"), so
 * it is never a tcp lane's key.
 */
int slot_seal_init(struct lane_seal *s, const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane,
		   bool encrypt);
/* The same under suite (AES-256-GCM: slot_seal_init's key). */
int slot_seal_init_suite(struct lane_seal *s, enum lane_seal_suite suite,
			 const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane, bool encrypt);

/* The next frame: its nonce, and aad (the clear header) authenticated with it. */
int lane_seal_begin(struct lane_seal *s, const uint8_t *aad, size_t aadlen);
/* Encrypts or decrypts len bytes of the frame's payload; in == out is allowed. */
int lane_seal_update(struct lane_seal *s, const uint8_t *in, uint8_t *out, size_t len);
/*
 * Ends the frame. Sealing writes its tag; opening checks it in constant time
 * and returns -EBADMSG when the frame is not what the peer sealed.
 */
int lane_seal_end(struct lane_seal *s, uint8_t tag[LANE_SEAL_TAG_LEN]);
