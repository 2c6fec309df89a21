/*
 * guardhost.h: the C ABI of guardhost guardrail providers, version 1.0.
 *
 * A provider library written in C, C++, Zig (or anything that can export a
 * C data symbol) exports one `guardhost_descriptor` under the name that the
 * operator's `use: path/to/libfoo.so:Symbol` gives. The host opens the
 * library, finds the symbol, recognises it by its magic (the Rust ABI has a
 * different one), checks the ABI major and the descriptor's size, and only
 * then calls into it.
 *
 * Everything that crosses this boundary is UTF-8 JSON text plus a length:
 * the config in `create`, the request and the decision in `evaluate`. The
 * JSON shapes are given beside each function and in docs/authors.md.
 *
 * Versioning: the major changes only when a field changes meaning or place;
 * the host then refuses the library with a message naming both versions. A
 * minor only appends fields at the end of the descriptor; `size` says how
 * many bytes the library's descriptor has, so a host reads appended fields
 * only when the library has them (as PostgreSQL's magic block does).
 *
 * This file is part of guardhost (MIT OR Apache-2.0).
 */
#ifndef GUARDHOST_H
#define GUARDHOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The first 8 bytes of every C descriptor: "GHCPROV" and a NUL byte. */
#define GUARDHOST_C_MAGIC "GHCPROV"

/* The ABI this header describes. A host loads descriptors of its own major
 * and any minor (fields it does not know are ignored). */
#define GUARDHOST_C_ABI_MAJOR 1
#define GUARDHOST_C_ABI_MINOR 0

/* Bits of `guardhost_descriptor.flags`. Unknown bits are ignored. */
/* `create` accepts config keys beyond `accepted_keys` (the host then checks
 * no key names, and injects `framework`). */
#define GUARDHOST_ACCEPTS_ANY_KEY ((uint64_t)1 << 0)
/* `create` accepts the key `framework`: the host adds
 * `"framework": "deerflow"` to the config unless the operator set it. The
 * same as listing "framework" in `accepted_keys`. */
#define GUARDHOST_TAKES_FRAMEWORK ((uint64_t)1 << 1)

/* What `create` and `evaluate` return. */
typedef int32_t guardhost_status;
/* Success: the output holds the result. */
#define GUARDHOST_OK ((guardhost_status)0)
/* An ordinary error: the output, if any, is a UTF-8 message for the
 * operator. For `evaluate`, the host applies `fail_closed`. */
#define GUARDHOST_ERROR ((guardhost_status)1)
/* `evaluate` only: a control-flow signal (LangGraph's GraphBubbleUp), never
 * a decision; the host hands it to its caller unchanged. The output, if
 * any, is a JSON object {"message": "...", "payload": <any JSON>}. */
#define GUARDHOST_INTERRUPT ((guardhost_status)2)

typedef struct guardhost_descriptor {
    /* GUARDHOST_C_MAGIC, 8 bytes including the terminating NUL. */
    char magic[8];
    /* GUARDHOST_C_ABI_MAJOR and GUARDHOST_C_ABI_MINOR as compiled. */
    uint16_t abi_major;
    uint16_t abi_minor;
    /* sizeof(guardhost_descriptor) as compiled: the host refuses a
     * descriptor smaller than version 1.0's. */
    uint32_t size;
    /* The provider's name (NUL-terminated UTF-8, not empty): shown in
     * messages, audit events and `guardhost check`. Static. */
    const char *name;
    /* The config keys `create` accepts by name: a NULL-terminated array of
     * NUL-terminated UTF-8 strings, or NULL for none. Static. The host
     * refuses a config with any other key (unless
     * GUARDHOST_ACCEPTS_ANY_KEY), naming the keys listed here. */
    const char *const *accepted_keys;
    /* GUARDHOST_ACCEPTS_ANY_KEY | GUARDHOST_TAKES_FRAMEWORK, or 0. */
    uint64_t flags;

    /* Builds a provider from its config.
     *
     * in:  `config`, `config_len`: a JSON object (UTF-8, `config_len` bytes,
     *      followed by a NUL byte that `config_len` does not count). Owned by
     *      the host; valid only during the call.
     * out: on GUARDHOST_OK, `*provider` is the provider's handle (any value,
     *      NULL included), passed back to `evaluate` and `destroy`.
     *      On GUARDHOST_ERROR, `*error` may point to a message of
     *      `*error_len` bytes, allocated by the library; the host frees it
     *      with `free_buffer`. Leaving `*error` NULL is allowed.
     * threads: may be called from any thread, and for several providers at
     *      once (one call per provider being built).
     * Must not throw (C++), longjmp past its frame, or exit. */
    guardhost_status (*create)(const char *config, size_t config_len, void **provider, char **error,
                               size_t *error_len);

    /* Decides one tool call.
     *
     * in:  `request`, `request_len`: a JSON object (UTF-8, NUL-terminated
     *      after `request_len` bytes), owned by the host, valid during the
     *      call: {"tool_name": str, "tool_input": object, "agent_id": str|null,
     *      "thread_id": str|null, "is_subagent": bool, "timestamp": str,
     *      "user_id", "user_role", "oauth_provider", "oauth_id", "run_id",
     *      "tool_call_id", "channel_user_id": str|null, "is_internal": bool,
     *      "authz_attributes": object}. Unknown keys must be ignored: later
     *      hosts may add some.
     * out: `*output`, `*output_len`: a buffer allocated by the library,
     *      freed by the host with `free_buffer` (NULL allowed for errors).
     *      On GUARDHOST_OK, a decision: {"allow": bool, "reasons":
     *      [{"code": str, "message": str}], "policy_id": str|null,
     *      "metadata": object}; only "allow" is required. To hold the call
     *      for a human's approval, or to run it with other arguments, deny
     *      it and put {"ask": {"approvers": [str], "timeout_s": 1..86400}}
     *      or {"rewrite": {"tool_input": object}} under the metadata key
     *      "guardhost.outcome" (keys starting with "guardhost." are the
     *      host's).
     * threads: called from many threads at once on the same provider; it
     *      must be thread-safe. It should not block for long: a slow
     *      provider needs `provider.timeout_ms`.
     * Must not throw (C++), longjmp past its frame, or exit. */
    guardhost_status (*evaluate)(void *provider, const char *request, size_t request_len, char **output,
                                 size_t *output_len);

    /* Releases a provider made by `create`. Called once, when no call to
     * `evaluate` on it is running or will start. May be NULL when there is
     * nothing to release. */
    void (*destroy)(void *provider);

    /* Frees a buffer the library returned (`*error` or `*output`), with the
     * length it returned. Called from any thread. */
    void (*free_buffer)(char *buffer, size_t len);
} guardhost_descriptor;

/* Fills the fixed fields of a descriptor:
 *   GUARDHOST_EXPORT const guardhost_descriptor MyProvider = {
 *       GUARDHOST_DESCRIPTOR_INIT,
 *       .name = "my-provider", ...
 *   };
 */
#define GUARDHOST_DESCRIPTOR_INIT                                                                    \
    .magic = GUARDHOST_C_MAGIC, .abi_major = GUARDHOST_C_ABI_MAJOR, .abi_minor = GUARDHOST_C_ABI_MINOR, \
    .size = (uint32_t)sizeof(guardhost_descriptor)

/* Exports a symbol from the library with default visibility. */
#if defined(_WIN32)
#define GUARDHOST_EXPORT __declspec(dllexport)
#else
#define GUARDHOST_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
}
#endif

#endif /* GUARDHOST_H */
