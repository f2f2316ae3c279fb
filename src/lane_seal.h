/* SPDX-License-Identifier: MIT */
/*
 * Sealed lanes: AES-256-GCM for every frame a tcp lane carries.
 *
 * Both ends of a session hold one 32-byte secret exported from the TLS
 * control channel (tls_export_secret, label LANE_SEAL_EXPORT_LABEL). Each
 * lane and direction gets its own key from it (HKDF-SHA256, info names the
 * lane and the direction), and each frame its own nonce: a 4-byte prefix
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
/* RFC 8446 7.5 exporter label; the context is empty. */
#define LANE_SEAL_EXPORT_LABEL "EXPORTER-rdmacp-lane-seal-v1"

struct lane_seal {
	void *ctx; /* EVP_CIPHER_CTX */
	uint32_t prefix;
	uint64_t count; /* frames begun so far */
	bool encrypt;
};

/*
 * The key of one lane and direction. from_connector: frames the side that
 * connected the lanes sends. Returns 0 or -EIO.
 */
int lane_seal_derive(const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane, bool from_connector,
		     uint8_t ret_key[LANE_SEAL_KEY_LEN]);

/* encrypt: we send this way (seal); else we receive it (open). */
int lane_seal_init(struct lane_seal *s, const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane,
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

/* The next frame: its nonce, and aad (the clear header) authenticated with it. */
int lane_seal_begin(struct lane_seal *s, const uint8_t *aad, size_t aadlen);
/* Encrypts or decrypts len bytes of the frame's payload; in == out is allowed. */
int lane_seal_update(struct lane_seal *s, const uint8_t *in, uint8_t *out, size_t len);
/*
 * Ends the frame. Sealing writes its tag; opening checks it in constant time
 * and returns -EBADMSG when the frame is not what the peer sealed.
 */
int lane_seal_end(struct lane_seal *s, uint8_t tag[LANE_SEAL_TAG_LEN]);
