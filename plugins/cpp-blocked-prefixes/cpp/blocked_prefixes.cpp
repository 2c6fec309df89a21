// The blocked-prefixes provider in C++20, against guardhost's C ABI.
//
// Config: {"blocked_prefixes": [str], "framework": str}. A tool whose name
// starts with a blocked prefix is denied (`custom.blocked`); every other
// tool is allowed. The provider takes `framework` (the host injects
// "deerflow") and reports it in each decision's metadata.
//
// C++ specifics the C ABI asks for: no exception may leave a function the
// host calls (each is `noexcept` and catches everything at its edge), and
// the descriptor needs `extern "C"` for an unmangled, external name.
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "guardhost.h"

namespace {

// ---- a small JSON value and parser -----------------------------------------

struct Json;
using Array = std::vector<Json>;
using Object = std::map<std::string, Json>;

struct Json {
    std::variant<std::nullptr_t, bool, double, std::string, Array, Object> value;

    const char *kind() const {
        static constexpr const char *names[] = {"null", "a boolean", "a number", "a string", "a list", "an object"};
        return names[value.index()];
    }
};

class Parser {
  public:
    explicit Parser(std::string_view text) : text_(text) {}

    Json parse() {
        Json value = next(0);
        space();
        if (at_ != text_.size()) throw std::runtime_error("trailing characters after the JSON value");
        return value;
    }

  private:
    std::string_view text_;
    size_t at_ = 0;

    void space() {
        while (at_ < text_.size() && std::strchr(" \t\r\n", text_[at_]) && text_[at_]) at_++;
    }

    bool eat(char c) {
        space();
        if (at_ < text_.size() && text_[at_] == c) {
            at_++;
            return true;
        }
        return false;
    }

    bool literal(std::string_view word) {
        if (text_.substr(at_, word.size()) != word) return false;
        at_ += word.size();
        return true;
    }

    Json next(int depth) {
        if (depth > 128) throw std::runtime_error("values nest more than 128 deep");
        space();
        if (at_ >= text_.size()) throw std::runtime_error("a value is missing at the end of the input");
        char c = text_[at_];
        if (c == '"') return Json{string()};
        if (eat('[')) {
            Array items;
            if (eat(']')) return Json{std::move(items)};
            do items.push_back(next(depth + 1));
            while (eat(','));
            if (!eat(']')) throw std::runtime_error("expected ',' or ']'");
            return Json{std::move(items)};
        }
        if (eat('{')) {
            Object members;
            if (eat('}')) return Json{std::move(members)};
            do {
                space();
                std::string key = string();
                if (!eat(':')) throw std::runtime_error("expected ':' after an object key");
                members[std::move(key)] = next(depth + 1);
            } while (eat(','));
            if (!eat('}')) throw std::runtime_error("expected ',' or '}'");
            return Json{std::move(members)};
        }
        if (literal("null")) return Json{nullptr};
        if (literal("true")) return Json{true};
        if (literal("false")) return Json{false};
        size_t used = 0;
        std::string number(text_.substr(at_, 64));
        double value = std::stod(number, &used);  // throws on no number
        at_ += used;
        return Json{value};
    }

    static void utf8(std::string &out, unsigned long cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    unsigned long hex4() {
        if (at_ + 4 > text_.size()) throw std::runtime_error("a \\u escape needs four hexadecimal digits");
        std::string digits(text_.substr(at_, 4));
        char *end = nullptr;
        unsigned long cp = std::strtoul(digits.c_str(), &end, 16);
        if (end != digits.c_str() + 4) throw std::runtime_error("a \\u escape needs four hexadecimal digits");
        at_ += 4;
        return cp;
    }

    std::string string() {
        if (!eat('"')) throw std::runtime_error("expected a string");
        std::string out;
        while (at_ < text_.size()) {
            char c = text_[at_++];
            if (c == '"') return out;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (at_ >= text_.size()) break;
            switch (char e = text_[at_++]) {
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                unsigned long cp = hex4();
                if (cp >= 0xD800 && cp <= 0xDBFF && literal("\\u")) {
                    unsigned long low = hex4();
                    if (low < 0xDC00 || low > 0xDFFF) throw std::runtime_error("a lone high surrogate escape");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                }
                utf8(out, cp);
                break;
            }
            default: out += e;  // '"', '\\', '/'
            }
        }
        throw std::runtime_error("a string is not terminated");
    }
};

std::string quoted(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            static constexpr char hex[] = "0123456789abcdef";
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

// ---- the provider ------------------------------------------------------------

struct BlockedPrefixes {
    std::vector<std::string> prefixes;
    std::string framework;

    explicit BlockedPrefixes(const Object &config) {
        for (const auto &[key, value] : config) {
            if (key == "blocked_prefixes") {
                const auto *list = std::get_if<Array>(&value.value);
                if (!list) throw std::runtime_error("`blocked_prefixes` must be a list of strings, found " + std::string(value.kind()));
                for (size_t i = 0; i < list->size(); i++) {
                    const auto *prefix = std::get_if<std::string>(&(*list)[i].value);
                    if (!prefix) {
                        throw std::runtime_error("`blocked_prefixes[" + std::to_string(i) + "]` must be a string, found " +
                                                 (*list)[i].kind());
                    }
                    if (prefix->empty()) {
                        throw std::runtime_error("`blocked_prefixes[" + std::to_string(i) + "]` is empty, which would block every tool");
                    }
                    prefixes.push_back(*prefix);
                }
            } else if (key == "framework") {
                const auto *name = std::get_if<std::string>(&value.value);
                if (!name) throw std::runtime_error("`framework` must be a string, found " + std::string(value.kind()));
                framework = *name;
            } else {
                throw std::runtime_error("unknown config key `" + key.substr(0, 60) + "`; the keys are blocked_prefixes, framework");
            }
        }
    }

    std::string decide(const Object &request) const {
        auto found = request.find("tool_name");
        const std::string *tool = found == request.end() ? nullptr : std::get_if<std::string>(&found->second.value);
        if (!tool) throw std::runtime_error("the request has no string `tool_name`");
        std::string metadata = "{\"framework\":" + quoted(framework) + "}";
        for (const auto &prefix : prefixes) {
            if (tool->starts_with(prefix)) {
                return "{\"allow\":false,\"reasons\":[{\"code\":\"custom.blocked\",\"message\":" +
                       quoted("tool '" + *tool + "' starts with the blocked prefix '" + prefix + "'") +
                       "}],\"metadata\":" + metadata + "}";
            }
        }
        return "{\"allow\":true,\"reasons\":[{\"code\":\"custom.allowed\",\"message\":\"\"}],\"metadata\":" + metadata + "}";
    }
};

// Hands `text` to the host in a buffer it frees with `free_buffer`.
guardhost_status hand_over(const std::string &text, guardhost_status status, char **out, size_t *out_len) noexcept {
    char *buffer = static_cast<char *>(std::malloc(text.size() + 1));
    if (!buffer) return GUARDHOST_ERROR;
    std::memcpy(buffer, text.c_str(), text.size() + 1);
    *out = buffer;
    *out_len = text.size();
    return status;
}

Object parse_object(const char *text, size_t len, const char *what) {
    Json value = Parser(std::string_view(text, len)).parse();
    auto *object = std::get_if<Object>(&value.value);
    if (!object) throw std::runtime_error(std::string(what) + " must be a JSON object");
    return std::move(*object);
}

guardhost_status create(const char *config, size_t config_len, void **provider, char **error, size_t *error_len) noexcept {
    try {
        auto made = std::make_unique<BlockedPrefixes>(parse_object(config, config_len, "the config"));
        *provider = made.release();
        return GUARDHOST_OK;
    } catch (const std::exception &e) {
        return hand_over(e.what(), GUARDHOST_ERROR, error, error_len);
    } catch (...) {
        return GUARDHOST_ERROR;
    }
}

guardhost_status evaluate(void *provider, const char *request, size_t request_len, char **output,
                          size_t *output_len) noexcept {
    try {
        const auto *self = static_cast<const BlockedPrefixes *>(provider);
        return hand_over(self->decide(parse_object(request, request_len, "the request")), GUARDHOST_OK, output, output_len);
    } catch (const std::exception &e) {
        return hand_over(e.what(), GUARDHOST_ERROR, output, output_len);
    } catch (...) {
        return GUARDHOST_ERROR;
    }
}

void destroy(void *provider) noexcept { delete static_cast<BlockedPrefixes *>(provider); }

void free_buffer(char *buffer, size_t) noexcept { std::free(buffer); }

const char *const accepted_keys[] = {"blocked_prefixes", nullptr};

}  // namespace

// `extern "C"` on the definition itself gives the const object external
// linkage and an unmangled name.
extern "C" GUARDHOST_EXPORT const guardhost_descriptor CppBlockedPrefixes = {
    GUARDHOST_DESCRIPTOR_INIT,
    .name = "cpp-blocked-prefixes",
    .accepted_keys = accepted_keys,
    .flags = GUARDHOST_TAKES_FRAMEWORK,
    .create = create,
    .evaluate = evaluate,
    .destroy = destroy,
    .free_buffer = free_buffer,
};
