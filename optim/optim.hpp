#pragma once
// Everything in optim/ at once.

#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "optim/sgd.hpp"
