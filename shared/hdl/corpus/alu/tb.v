// Self-checking testbench for alu: every operation against a behavioural model, on edge cases
// (zero, all ones, signed extremes) and on pseudo-random operands.
`timescale 1ns/1ps
module tb;
    reg  [2:0] op;
    reg  [7:0] a, b;
    wire [7:0] y;
    wire       zero;
    reg  [7:0] want;
    integer    errors = 0;
    integer    i, k;
    reg  [7:0] edge_values [0:5];

    alu dut (.op(op), .a(a), .b(b), .y(y), .zero(zero));

    function [7:0] model(input [2:0] f, input [7:0] x, input [7:0] z);
        case (f)
            3'd0: model = x + z;
            3'd1: model = x - z;
            3'd2: model = x & z;
            3'd3: model = x | z;
            3'd4: model = x ^ z;
            3'd5: model = x << z[2:0];
            3'd6: model = x >> z[2:0];
            default: model = ($signed(x) < $signed(z)) ? 8'd1 : 8'd0;
        endcase
    endfunction

    task try(input [2:0] f, input [7:0] x, input [7:0] z);
        begin
            op = f; a = x; b = z;
            #1;
            want = model(f, x, z);
            if (y !== want || zero !== (want == 8'd0)) begin
                $error("op %0d a=%h b=%h: y=%h zero=%b, expected y=%h", f, x, z, y, zero, want);
                errors = errors + 1;
            end
        end
    endtask

    initial begin
        edge_values[0] = 8'h00; edge_values[1] = 8'h01; edge_values[2] = 8'h7F;
        edge_values[3] = 8'h80; edge_values[4] = 8'hFF; edge_values[5] = 8'h5A;
        for (k = 0; k < 8; k = k + 1)
            for (i = 0; i < 36; i = i + 1)
                try(k[2:0], edge_values[i / 6], edge_values[i % 6]);
        for (i = 0; i < 400; i = i + 1)
            try(i[2:0], $random, $random);
        if (errors != 0)
            $fatal(1, "alu: %0d check(s) failed", errors);
        $display("alu: all checks passed");
        $finish;
    end
endmodule
