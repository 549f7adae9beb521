#include "tools/common/cli_rules.h"

#include <cctype>
#include <map>
#include <regex>
#include <sstream>
#include <string>

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

}  // namespace

std::string parse_error_text(const CLI::App& app, const CLI::ParseError& e) {
  const std::string text = e.what();
  std::smatch m;
  if (std::regex_match(text, m,
                       std::regex("The following arguments? (?:was|were) not expected: (.*)")))
    return unexpected_args(m[1]);
  if (std::regex_match(text, m, std::regex("Could not convert: (\\S+) = (.*)"))) {
    const std::string value = m[2];
    if (std::regex_match(value, std::regex("[+-]?[0-9]+")))  // digits beyond the flag's type
      return std::string(m[1]) + ": " + value + " is out of range for " + what_it_takes(app, m[1]);
    return std::string(m[1]) + ": " + value + " is not " + what_it_takes(app, m[1]);
  }
  if (std::regex_match(text, m, std::regex("(\\S+): At Most \\d+ required but received \\d+")))
    return std::string(m[1]) + " is given more than once; give it once";
  if (std::regex_match(text, m, std::regex("(\\S+): \\d+ required \\S+ missing")))
    return std::string(m[1]) + " needs " + what_it_takes(app, m[1]);
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
  return text;
}

namespace {

// A number's text as CLI11 would misread it: a base prefix (0x, 0b, 0o) or,
// for a whole number, a leading zero (octal). Empty: plain decimal.
std::string misread_number(const std::string& text, bool whole) {
  std::string digits = text;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.erase(0, 1);
  if (digits.size() < 2 || digits[0] != '0') return {};
  const char next = static_cast<char>(std::tolower(static_cast<unsigned char>(digits[1])));
  if (next == 'x' || next == 'b' || next == 'o') return "has a base prefix";
  if (whole && std::isdigit(static_cast<unsigned char>(next))) return "has a leading zero";
  return {};
}

}  // namespace

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
