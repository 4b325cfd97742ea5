// Text tables for the human outputs (status, ls), coloured on a terminal.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "util/colour.h"

namespace cordon::cli {

// Columns as wide as their widest cell (in characters, not bytes: cells are
// UTF-8 made safe for display), two spaces apart; colour is applied after
// padding so that escape sequences never shift a column.
class Table {
 public:
  struct Cell {
    std::string text;
    Colour colour = Colour::kNone;
    Cell(std::string t, Colour c = Colour::kNone) : text(std::move(t)), colour(c) {}  // NOLINT: implicit by design
    Cell(const char* t, Colour c = Colour::kNone) : text(t), colour(c) {}              // NOLINT
  };
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}

  // A row; `details` are printed under it, indented two spaces, unpadded.
  void Add(std::vector<Cell> row, std::vector<std::string> details = {});
  std::string Render(bool colour) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<Cell>> rows_;
  std::vector<std::vector<std::string>> details_;
};

// Characters in a UTF-8 string (continuation bytes not counted).
size_t DisplayWidth(const std::string& text);

}  // namespace cordon::cli
