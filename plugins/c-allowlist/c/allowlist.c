/*
 * The allowlist provider, in C11, against guardhost's C ABI (guardhost.h).
 *
 * Config: {"allowed_tools": [str] | null, "denied_tools": [str] | null}.
 * A tool is denied when it is not in `allowed_tools` (if given) or is in
 * `denied_tools` (compared after trimming ASCII whitespace), and when its
 * name holds an ASCII control character; the reason codes and messages are
 * those of guardhost's built-in allowlist.
 *
 * The JSON reader below handles exactly what this provider needs: objects,
 * arrays, strings with every escape, and skipping any other value. Every
 * helper is `static`: the only symbol the library exports is the descriptor.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guardhost.h"

/* ---- a growable byte buffer ------------------------------------------ */

typedef struct {
    char *data;
    size_t len, cap;
    bool failed; /* out of memory */
} buffer;

static void put(buffer *b, const char *bytes, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (b->len + n + 1 > cap) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void put_str(buffer *b, const char *s) { put(b, s, strlen(s)); }

static void put_fmt(buffer *b, const char *format, ...) {
    char small[256];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(small, sizeof small, format, args);
    va_end(args);
    if (n > 0) put(b, small, (size_t)n < sizeof small ? (size_t)n : sizeof small - 1);
}

/* `s` as a JSON string, quotes included. */
static void put_json_string(buffer *b, const char *s, size_t n) {
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char escaped[2] = {'\\', (char)c};
            put(b, escaped, 2);
        } else if (c < 0x20) {
            put_fmt(b, "\\u%04x", c);
        } else {
            put(b, (const char *)&c, 1);
        }
    }
    put(b, "\"", 1);
}

/* ---- a small JSON reader ---------------------------------------------- */

typedef struct {
    const char *at, *end;
    char error[160]; /* empty while all is well */
} reader;

static void fail(reader *r, const char *format, ...) {
    if (r->error[0]) return; /* keep the first error */
    va_list args;
    va_start(args, format);
    vsnprintf(r->error, sizeof r->error, format, args);
    va_end(args);
}

static void skip_ws(reader *r) {
    while (r->at < r->end && (*r->at == ' ' || *r->at == '\t' || *r->at == '\n' || *r->at == '\r')) r->at++;
}

static bool eat(reader *r, char c) {
    skip_ws(r);
    if (r->at < r->end && *r->at == c) {
        r->at++;
        return true;
    }
    return false;
}

/* The JSON type of the next value, for messages. */
static const char *kind_of_next(reader *r) {
    skip_ws(r);
    if (r->at >= r->end) return "the end of the input";
    switch (*r->at) {
    case '"': return "a string";
    case '{': return "an object";
    case '[': return "a list";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: return "a number";
    }
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static long read_hex4(reader *r) {
    if (r->end - r->at < 4) return -1;
    long value = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(r->at[i]);
        if (d < 0) return -1;
        value = value * 16 + d;
    }
    r->at += 4;
    return value;
}

static void put_utf8(buffer *b, unsigned long cp) {
    char out[4];
    size_t n;
    if (cp < 0x80) {
        out[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    put(b, out, n);
}

/* Reads a string into `out` (decoded; may hold NUL bytes). */
static bool read_string(reader *r, buffer *out) {
    if (!eat(r, '"')) {
        fail(r, "expected a string, found %s", kind_of_next(r));
        return false;
    }
    while (r->at < r->end) {
        char c = *r->at++;
        if (c == '"') return !out->failed;
        if (c != '\\') {
            put(out, &c, 1);
            continue;
        }
        if (r->at >= r->end) break;
        char e = *r->at++;
        switch (e) {
        case '"': put(out, "\"", 1); break;
        case '\\': put(out, "\\", 1); break;
        case '/': put(out, "/", 1); break;
        case 'b': put(out, "\b", 1); break;
        case 'f': put(out, "\f", 1); break;
        case 'n': put(out, "\n", 1); break;
        case 'r': put(out, "\r", 1); break;
        case 't': put(out, "\t", 1); break;
        case 'u': {
            long cp = read_hex4(r);
            if (cp < 0) {
                fail(r, "a \\u escape needs four hexadecimal digits");
                return false;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF && r->end - r->at >= 6 && r->at[0] == '\\' && r->at[1] == 'u') {
                r->at += 2;
                long low = read_hex4(r);
                if (low >= 0xDC00 && low <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                } else {
                    fail(r, "a high surrogate escape is not followed by a low one");
                    return false;
                }
            }
            put_utf8(out, (unsigned long)cp);
            break;
        }
        default: fail(r, "unknown escape \\%c in a string", e); return false;
        }
    }
    fail(r, "a string is not terminated");
    return false;
}

/* Skips one value of any type. */
static bool skip_value(reader *r, int depth) {
    if (depth > 128) {
        fail(r, "values nest more than 128 deep");
        return false;
    }
    skip_ws(r);
    if (r->at >= r->end) {
        fail(r, "a value is missing at the end of the input");
        return false;
    }
    char c = *r->at;
    if (c == '"') {
        buffer ignored = {0};
        bool ok = read_string(r, &ignored);
        free(ignored.data);
        return ok;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        r->at++;
        if (eat(r, close)) return true;
        do {
            if (c == '{') {
                buffer ignored = {0};
                bool ok = read_string(r, &ignored) && eat(r, ':');
                free(ignored.data);
                if (!ok) {
                    fail(r, "an object key must be a string followed by ':'");
                    return false;
                }
            }
            if (!skip_value(r, depth + 1)) return false;
        } while (eat(r, ','));
        if (!eat(r, close)) {
            fail(r, "expected ',' or '%c'", close);
            return false;
        }
        return true;
    }
    /* A number or a literal: the run of characters that may form one. */
    const char *start = r->at;
    while (r->at < r->end && strchr("+-.0123456789eEtruefalsn", *r->at)) r->at++;
    if (r->at == start) {
        fail(r, "unexpected character '%c'", c);
        return false;
    }
    return true;
}

/* ---- the provider ------------------------------------------------------ */

typedef struct {
    char **items;
    size_t count;
    bool present; /* false: the key was absent or null */
} string_list;

typedef struct {
    string_list allowed, denied;
} allowlist;

static void free_list(string_list *list) {
    for (size_t i = 0; i < list->count; i++) free(list->items[i]);
    free(list->items);
}

/* `key`'s value: null, or a list of strings. */
static bool read_list(reader *r, const char *key, string_list *list) {
    skip_ws(r);
    if (r->end - r->at >= 4 && memcmp(r->at, "null", 4) == 0) {
        r->at += 4;
        return true;
    }
    if (!eat(r, '[')) {
        fail(r, "`%s` must be a list of tool names or null, found %s", key, kind_of_next(r));
        return false;
    }
    list->present = true;
    if (eat(r, ']')) return true;
    do {
        skip_ws(r);
        if (r->at >= r->end || *r->at != '"') {
            fail(r, "`%s[%zu]` must be a string (a tool name), found %s", key, list->count, kind_of_next(r));
            return false;
        }
        buffer item = {0};
        if (!read_string(r, &item)) {
            free(item.data);
            return false;
        }
        if (!item.data) item.data = calloc(1, 1);
        char **grown = item.data ? realloc(list->items, (list->count + 1) * sizeof *grown) : NULL;
        if (!grown) {
            free(item.data);
            fail(r, "out of memory");
            return false;
        }
        list->items = grown;
        list->items[list->count++] = item.data;
    } while (eat(r, ','));
    if (!eat(r, ']')) {
        fail(r, "`%s` is not a well-formed list", key);
        return false;
    }
    return true;
}

static bool contains(const string_list *list, const char *name, size_t len) {
    for (size_t i = 0; i < list->count; i++) {
        if (strlen(list->items[i]) == len && memcmp(list->items[i], name, len) == 0) return true;
    }
    return false;
}

static bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Trims ASCII whitespace in place. */
static void trim(char *s) {
    size_t len = strlen(s), start = 0;
    while (start < len && is_ascii_space(s[start])) start++;
    while (len > start && is_ascii_space(s[len - 1])) len--;
    memmove(s, s + start, len - start);
    s[len - start] = '\0';
}

/* Hands `b` to the host as an output buffer (or reports it failed). */
static guardhost_status hand_over(buffer *b, guardhost_status status, char **out, size_t *out_len) {
    if (b->failed) {
        free(b->data);
        *out = NULL;
        *out_len = 0;
        return GUARDHOST_ERROR;
    }
    *out = b->data;
    *out_len = b->len;
    return status;
}

static guardhost_status create(const char *config, size_t config_len, void **provider, char **error,
                               size_t *error_len) {
    allowlist *self = calloc(1, sizeof *self);
    reader r = {config, config + config_len, {0}};
    if (!self) {
        fail(&r, "out of memory");
    } else if (!eat(&r, '{')) {
        fail(&r, "the config must be a JSON object");
    } else if (!eat(&r, '}')) {
        do {
            buffer key = {0};
            if (!read_string(&r, &key) || !eat(&r, ':')) {
                free(key.data);
                fail(&r, "the config is not a well-formed object");
                break;
            }
            const char *name = key.data ? key.data : "";
            if (strcmp(name, "allowed_tools") == 0) {
                read_list(&r, "allowed_tools", &self->allowed);
            } else if (strcmp(name, "denied_tools") == 0) {
                read_list(&r, "denied_tools", &self->denied);
            } else {
                fail(&r, "unknown config key `%.60s`; the keys are allowed_tools, denied_tools", name);
            }
            free(key.data);
        } while (!r.error[0] && eat(&r, ','));
        if (!r.error[0] && !eat(&r, '}')) fail(&r, "the config is not a well-formed object");
    }
    if (r.error[0]) {
        if (self) {
            free_list(&self->allowed);
            free_list(&self->denied);
            free(self);
        }
        buffer message = {0};
        put_str(&message, r.error);
        hand_over(&message, GUARDHOST_ERROR, error, error_len);
        return GUARDHOST_ERROR;
    }
    for (size_t i = 0; i < self->denied.count; i++) trim(self->denied.items[i]);
    *provider = self;
    return GUARDHOST_OK;
}

static void deny(buffer *out, const char *code, const char *message_prefix, const char *name, size_t len,
                 const char *message_suffix) {
    buffer message = {0};
    put_str(&message, message_prefix);
    put(&message, name, len);
    put_str(&message, message_suffix);
    put_str(out, "{\"allow\":false,\"reasons\":[{\"code\":\"");
    put_str(out, code);
    put_str(out, "\",\"message\":");
    put_json_string(out, message.data ? message.data : "", message.len);
    put_str(out, "}]}");
    if (message.failed) out->failed = true;
    free(message.data);
}

static guardhost_status evaluate(void *provider, const char *request, size_t request_len, char **output,
                                 size_t *output_len) {
    const allowlist *self = provider;
    reader r = {request, request + request_len, {0}};
    buffer name = {0};
    bool found = false;
    if (!eat(&r, '{')) fail(&r, "the request is not a JSON object");
    if (!r.error[0] && !eat(&r, '}')) {
        do {
            buffer key = {0};
            if (!read_string(&r, &key) || !eat(&r, ':')) {
                free(key.data);
                fail(&r, "the request is not a well-formed object");
                break;
            }
            if (!found && key.data && strcmp(key.data, "tool_name") == 0) {
                found = read_string(&r, &name);
            } else {
                skip_value(&r, 0);
            }
            free(key.data);
        } while (!r.error[0] && eat(&r, ','));
    }
    if (!r.error[0] && !found) fail(&r, "the request has no `tool_name`");
    buffer out = {0};
    if (r.error[0]) {
        free(name.data);
        put_str(&out, r.error);
        return hand_over(&out, GUARDHOST_ERROR, output, output_len);
    }
    const char *tool = name.data ? name.data : "";
    size_t len = name.len;
    size_t control_at = len;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)tool[i];
        if (c < 0x20 || c == 0x7F) {
            control_at = i;
            break;
        }
    }
    if (control_at < len) {
        char suffix[64];
        snprintf(suffix, sizeof suffix, "' contains a control character (U+%04X)", (unsigned char)tool[control_at]);
        deny(&out, "oap.invalid_tool_name", "tool name '", tool, len, suffix);
    } else if (self->allowed.present && !contains(&self->allowed, tool, len)) {
        deny(&out, "oap.tool_not_allowed", "tool '", tool, len, "' not in allowlist");
    } else {
        size_t start = 0, end = len;
        while (start < end && is_ascii_space(tool[start])) start++;
        while (end > start && is_ascii_space(tool[end - 1])) end--;
        if (contains(&self->denied, tool + start, end - start)) {
            deny(&out, "oap.tool_not_allowed", "tool '", tool, len, "' is denied");
        } else {
            put_str(&out, "{\"allow\":true,\"reasons\":[{\"code\":\"oap.allowed\",\"message\":\"\"}]}");
        }
    }
    free(name.data);
    return hand_over(&out, GUARDHOST_OK, output, output_len);
}

static void destroy(void *provider) {
    allowlist *self = provider;
    free_list(&self->allowed);
    free_list(&self->denied);
    free(self);
}

static void free_buffer(char *buffer, size_t len) {
    (void)len;
    free(buffer);
}

static const char *const accepted_keys[] = {"allowed_tools", "denied_tools", NULL};

GUARDHOST_EXPORT const guardhost_descriptor CAllowlistProvider = {
    GUARDHOST_DESCRIPTOR_INIT,
    .name = "c-allowlist",
    .accepted_keys = accepted_keys,
    .flags = 0,
    .create = create,
    .evaluate = evaluate,
    .destroy = destroy,
    .free_buffer = free_buffer,
};
