#include "tools/common/cli_rules.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "zrt/runtime/error.h"

namespace zrt::tools {

CLI::Validator whole_number(long long lo, long long hi) {
  const std::string rule = "must be a whole number " +
                           (hi == std::numeric_limits<long long>::max()
                                ? "of at least " + std::to_string(lo)
                                : "from " + std::to_string(lo) + " to " + std::to_string(hi));
  return CLI::Validator(
      [lo, hi, rule](std::string& v) {
        std::size_t used = 0;
        long long x = 0;
        try {
          x = std::stoll(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        const bool ok = used == v.size() && !v.empty() && x >= lo && x <= hi;
        return ok ? std::string() : rule + " (got " + v + ")";
      },
      hi == std::numeric_limits<long long>::max()
          ? "INT>=" + std::to_string(lo)
          : "INT in " + std::to_string(lo) + ".." + std::to_string(hi));
}

namespace {

// The option called `name` in `app` or one of its subcommands, or null.
const CLI::Option* find_option(const CLI::App& app, const std::string& name) {
  if (const CLI::Option* o = app.get_option_no_throw(name)) return o;
  for (const CLI::App* sub : app.get_subcommands({}))
    if (const CLI::Option* o = find_option(*sub, name)) return o;
  return nullptr;
}

// "INT:POSITIVE" → "a whole number"; "FLOAT" → "a number"; else the type.
std::string what_it_takes(const CLI::App& app, const std::string& name) {
  const CLI::Option* o = find_option(app, name);
  const std::string type = o ? o->get_type_name() : "";
  if (type.starts_with("INT") || type.starts_with("UINT")) return "a whole number";
  if (type.starts_with("FLOAT")) return "a number";
  return type.empty() || type.starts_with("TEXT") ? "a value" : "a value (" + type + ")";
}

// CLI11's extras: unknown flags first (a value after one is its value), else the values.
std::string unexpected_args(const std::string& list) {
  std::istringstream in(list);
  std::string arg, flags, values;
  while (in >> arg)
    if (arg.starts_with("-"))
      flags += (flags.empty() ? "unknown flag " : ", ") + arg;
    else
      values += (values.empty() ? "unexpected value '" : "', '") + arg;
  return !flags.empty()
             ? flags
             : values + "' (a flag takes one value, a command the arguments --help lists)";
}

// A number's text past what strtoll, and so CLI11, skips: leading white
// space, then a sign.
std::string_view unsigned_part(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\n\v\f\r");
  s = first == std::string_view::npos ? std::string_view() : s.substr(first);
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  return s;
}

// Plain string matching of CLI11's messages (std::regex would add 20 s to
// this file's compile under the sanitizers).
bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "NAME: REST" with NAME free of spaces: REST, and NAME in `name`.
std::optional<std::string_view> after_flag_name(std::string_view text, std::string& name) {
  const size_t colon = text.find(": ");
  if (colon == std::string_view::npos || colon == 0 ||
      text.substr(0, colon).find(' ') != std::string_view::npos)
    return std::nullopt;
  name = std::string(text.substr(0, colon));
  return text.substr(colon + 2);
}

// The words of `text` split at single spaces.
std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t start = 0; start <= text.size();) {
    const size_t end = std::min(text.find(' ', start), text.size());
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A number's text as CLI11 would misread it: a base prefix (0x, 0b, 0o) or,
// for a whole number, a leading zero (octal). Empty: plain decimal.
std::string misread_number(const std::string& text, bool whole) {
  const std::string_view digits = unsigned_part(text);
  if (digits.size() < 2 || digits[0] != '0') return {};
  const char next = static_cast<char>(std::tolower(static_cast<unsigned char>(digits[1])));
  if (next == 'x' || next == 'b' || next == 'o') return "has a base prefix";
  if (whole && std::isdigit(static_cast<unsigned char>(next))) return "has a leading zero";
  return {};
}

}  // namespace

bool is_whole_number(std::string_view s) { return all_digits(unsigned_part(s)); }

namespace {
// Why flag `name` could not convert whole number `value`: a value within 64
// bits is past the flag's 32-bit type, whose bound is said; one past 64
// bits is out of range for any. (Each flag's own rule, "must be positive",
// has judged the value before it is converted.)
std::string whole_number_bound(const CLI::App& app, const std::string& name,
                               const std::string& value) {
  const CLI::Option* o = find_option(app, name);
  const bool is_unsigned = o && o->get_type_name().starts_with("UINT");
  const std::string_view digits = unsigned_part(value);
  const bool negative =
      digits.size() < value.size() && value[value.size() - digits.size() - 1] == '-';
  if (negative && is_unsigned) return "is below 0, the smallest it takes";
  errno = 0;
  (void)std::strtoll(value.c_str(), nullptr, 10);
  if (errno == ERANGE) return "is out of range for a whole number";
  if (is_unsigned) return "is above 2^32 - 1, the largest it takes";
  return negative ? "is below -2^31, the smallest it takes"
                  : "is above 2^31 - 1, the largest it takes";
}
}  // namespace

std::string parse_error_text(const CLI::App& app, const CLI::ParseError& e) {
  const std::string text = e.what();
  for (const char* prefix :
       {"The following argument was not expected: ", "The following arguments were not expected: "})
    if (text.starts_with(prefix)) return unexpected_args(text.substr(std::strlen(prefix)));
  if (const std::string prefix = "Could not convert: "; text.starts_with(prefix)) {
    const size_t equals = text.find(" = ", prefix.size());
    const std::string name = text.substr(prefix.size(), equals - prefix.size());
    if (equals != std::string::npos && !name.empty() && name.find(' ') == std::string::npos) {
      const std::string value = text.substr(equals + 3);
      if (is_whole_number(value))  // digits beyond the flag's type
        return name + ": " + value + " " + whole_number_bound(app, name, value);
      return name + ": " + value + " is not " + what_it_takes(app, name);
    }
  }
  std::string name;
  if (const auto rest = after_flag_name(text, name)) {
    const std::vector<std::string_view> w = words(*rest);
    // "NAME: At Most N required but received M"
    if (w.size() == 7 && w[0] == "At" && w[1] == "Most" && all_digits(w[2]) && w[3] == "required" &&
        w[4] == "but" && w[5] == "received" && all_digits(w[6]))
      return name + " is given more than once; give it once";
    // "NAME: N required TYPE missing"
    if (w.size() == 4 && all_digits(w[0]) && w[1] == "required" && !w[2].empty() &&
        w[3] == "missing")
      return name + " needs " + what_it_takes(app, name);
    // IsMember's "NAME: VALUE not in {A,B}": the value quoted, so that a
    // space in it shows (choices are matched exactly).
    if (const std::size_t at = rest->rfind(" not in {");
        at != std::string_view::npos && rest->ends_with("}")) {
      std::string choices(rest->substr(at + 9, rest->size() - at - 10));
      for (std::size_t c = choices.find(','); c != std::string::npos; c = choices.find(',', c + 2))
        choices.replace(c, 1, ", ");
      return name + ": '" + std::string(rest->substr(0, at)) + "' is not one of " + choices;
    }
  }
  if (text == "A subcommand is required") {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({}))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    const std::vector<std::string> rest = app.remaining();
    const std::string first = rest.empty() ? "" : rest.front();
    return (first.empty()            ? "no command given"
            : first.starts_with("-") ? "unknown flag " + first + " before a command"
                                     : "unknown command '" + first + "'") +
           " (one of: " + names + ")";
  }
  // CLI11 checks required arguments before it refuses extras: `verify --x`
  // would say "checkpoint is required" and never name --x.
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    std::string flags;
    for (const std::string& arg : app.remaining(true))
      if (arg.starts_with("-")) flags += (flags.empty() ? "" : " ") + arg;
    if (!flags.empty()) return unexpected_args(flags);
  }
  return text;
}

void check_command_line(const CLI::App& app, int argc, const char* const* argv) {
  std::map<std::string, int> seen;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.starts_with("--")) continue;
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    if (app.get_option_no_throw(name) != nullptr)
      ZRT_CHECK_ARG(++seen[name] == 1, name, " is given more than once; give it once",
                    find_option(app, name)->get_expected_max() > 1
                        ? " (a list goes in one value, comma-separated)"
                        : std::string());
    const CLI::Option* o = find_option(app, name);
    if (o == nullptr || o->get_expected_min() < 1) continue;
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];  // this flag's value, not a flag of its own
      const std::string next = value.substr(0, value.find('='));
      ZRT_CHECK_ARG(!(next.starts_with("--") && find_option(app, next) != nullptr), name,
                    " needs a value, but the next argument is the flag ", next,
                    " (a value that begins with -- goes as ", name, "=VALUE)");
    }
    const std::string type = o->get_type_name();
    const bool whole = type.starts_with("INT") || type.starts_with("UINT");
    if (!whole && !type.starts_with("FLOAT")) continue;
    std::istringstream items(value);  // a list's items are comma-separated
    for (std::string item; std::getline(items, item, ',');) {
      const std::string why = misread_number(item, whole);
      ZRT_CHECK_ARG(why.empty(), name, ": ", item, " ", why, "; write the number in decimal");
    }
  }
}

}  // namespace zrt::tools
